/**
 * What the merges' database tests share: the counted in-memory database (db/CountedDatabase.testing.ts), and a
 * repository's rows written directly (branches, and commits stored as a push leaves them; the organization and
 * repository rows are `entities/Commands.testing.ts`'s `repositoryRows`).
 */
import { ApiSync } from "@grove/api"
import * as Tree from "@grove/core/objects/Tree"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import type { Built } from "../../../../test/support/content.ts"
import { ContentObjects } from "../content/ContentObjects.ts"

export { countedDatabase, type Traffic } from "../db/CountedDatabase.testing.ts"

export const branchRow = (repoId: string, name: string, head: string | null) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO branches ${sql.insert({ repo_id: repoId, name, head, created_by: "t", created_at: "2026-11-22T00:00:00+00:00" })}`
  })

/** Stores a built commit as a push would leave it: its trees, the commit row (published), the trees reached. */
export const storeCommit = (repoId: string, orgId: string, built: Built) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const objects = yield* ContentObjects
    yield* objects.storeTrees(orgId, built.trees.map((t) => ({ hash: t.hash, body: Tree.encodeTree(t.entries) })))
    const { files, ...commit } = built.commit
    yield* objects.stageCommits(repoId, [{ ...commit, files: files.map(ApiSync.toFileChangeData) }])
    yield* sql`UPDATE commits SET published = true WHERE repo_id = ${repoId} AND hash = ${built.commit.hash}`
    yield* sql`INSERT INTO repo_trees (repo_id, tree_hash) SELECT ${repoId}::uuid, unnest(${built.trees.map((t) => t.hash)}::text[]) ON CONFLICT DO NOTHING`
  })
