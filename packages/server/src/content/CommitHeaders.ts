/**
 * Commit rows without their file lists. A commit's `files` (what it changed) can be as large as the
 * tree: the commit that added a repository's 20,000 files lists all of them, and a merge whose base is
 * that commit read and decoded the whole list only to take its manifest hash (CPU per merge grew with
 * the tree, issue 24). Planning a merge, sync or revert walks trees; it needs the header fields only.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { inBatches } from "../db/Batches.ts"
import type { CommitRow } from "./ContentObjects.ts"

export type CommitHeader = Omit<CommitRow, "files">

/** The columns of a header: every column of a commit row but `files`. */
export const commitHeaderColumns = (sql: SqlClient.SqlClient) =>
  sql`hash, branch_name, parent_hash, merge_parent_hash, manifest_hash, author, message, timestamp, published`

/** Of `hashes`, the repository's commit rows (published or staged), by hash, without `files`. */
export const loadCommitHeaders = (repoId: string, hashes: ReadonlyArray<string>): Effect.Effect<Map<string, CommitHeader>, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* inBatches([...new Set(hashes)], (slice) =>
      sql<CommitHeader>`SELECT ${commitHeaderColumns(sql)} FROM commits WHERE repo_id = ${repoId} AND hash = ANY(${slice})`)
    return new Map(rows.map((r) => [r.hash, r]))
  })
