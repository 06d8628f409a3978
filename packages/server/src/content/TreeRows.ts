/**
 * Trees written together with the commit row that needs them: what a merge, sync or revert stores before its
 * command publishes the commit. Trees go in hash order (ContentObjects.storeTrees' order, so two writers of
 * the same trees do not deadlock) and in slices of at most BATCH rows; the last slice and the commit row are
 * one statement, so a landing of a few directories costs one round trip (MergeStatements.test pins it).
 */
import type { ApiSync } from "@grove/api"
import type * as Commit from "@grove/core/objects/Commit"
import * as Timestamp from "@grove/core/objects/Timestamp"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { BATCH, byHash, plannedFor } from "../db/Batches.ts"

export interface TreeRow {
  readonly hash: string
  readonly body: string
}

/** An unpublished commit row as a landing writes it: the fields it hashed, its hash and what it changed. */
export interface CommitRowInsert {
  readonly repoId: string
  readonly hash: string
  readonly fields: Commit.CommitFields
  readonly files: ReadonlyArray<ApiSync.FileChangeData>
}

/**
 * Stores `trees` of the organization (rows already stored are kept) and the commit row (kept if stored);
 * answers the trees' hashes in the order written.
 */
export const storeTreesWithCommit = (
  orgId: string,
  unsorted: ReadonlyArray<TreeRow>,
  commit: CommitRowInsert
): Effect.Effect<ReadonlyArray<string>, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const trees = byHash(unsorted, (t) => t.hash)
    const insertTrees = (slice: ReadonlyArray<TreeRow>) =>
      sql`INSERT INTO trees (org_id, hash, body)
        SELECT ${orgId}::uuid, t.hash, t.body FROM unnest(${slice.map((t) => t.hash)}::text[], ${slice.map((t) => t.body)}::text[]) AS t(hash, body)
        ON CONFLICT DO NOTHING`
    // Every slice but the last alone; the last (possibly empty) goes with the commit row.
    const lastStart = trees.length === 0 ? 0 : Math.floor((trees.length - 1) / BATCH) * BATCH
    for (let i = 0; i < lastStart; i += BATCH) {
      yield* plannedFor(BATCH, insertTrees(trees.slice(i, i + BATCH)))
    }
    const last = trees.slice(lastStart)
    yield* plannedFor(last.length, sql`WITH stored AS (${insertTrees(last)} RETURNING 1)
      INSERT INTO commits ${
      sql.insert({
        repo_id: commit.repoId,
        hash: commit.hash,
        ...commit.fields,
        timestamp: Timestamp.formatTimestamp(commit.fields.timestamp),
        files: JSON.stringify(commit.files)
      })
    } ON CONFLICT DO NOTHING`)
    return trees.map((t) => t.hash)
  })
