/** Branch reads, straight from the database; writes are Branch entity commands. */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import * as Keyset from "../db/Keyset.ts"
import type { KeyColumn, Keyed, PageRequest } from "../db/Keyset.ts"
import { branchColumns, type BranchRecord } from "./BranchRecord.ts"

export interface BranchReader {
  readonly name: string
  readonly readAt: Date
}

export class Branches extends Context.Service<Branches, {
  readonly list: (repoId: string) => Effect.Effect<ReadonlyArray<BranchRecord>, SqlError>
  /**
   * One page of the branches (of one status, or all): main first, then the most recently updated,
   * then by name; at most `page.limit + 1` rows after `page.after`.
   */
  readonly listPage: (
    repoId: string,
    status: BranchRecord["status"] | undefined,
    page: PageRequest
  ) => Effect.Effect<ReadonlyArray<Keyed<BranchRecord>>, SqlError>
  readonly get: (repoId: string, name: string) => Effect.Effect<BranchRecord | undefined, SqlError>
  /** Records that `reader` read the branch now, and answers who else has read it, most recent first. */
  readonly recordRead: (repoId: string, name: string, reader: string) => Effect.Effect<ReadonlyArray<BranchReader>, SqlError>
}>()("grove/server/content/Branches") {
  static readonly layer = Layer.effect(Branches, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return Branches.of({
      list: (repoId) =>
        sql<BranchRecord>`SELECT ${branchColumns(sql)} FROM branches WHERE repo_id = ${repoId}
          ORDER BY name = 'main' DESC, updated_at DESC, name`,
      listPage: (repoId, status, page) => {
        const key: ReadonlyArray<KeyColumn> = [
          { expr: sql`(name = 'main')`, descending: true, cast: "boolean" },
          { expr: sql`updated_at`, descending: true, cast: "timestamptz", read: sql`updated_at::text` },
          { expr: sql`name` }
        ]
        return sql<BranchRecord>`SELECT ${branchColumns(sql)} ${Keyset.selectKeys(sql, key)} FROM branches
          WHERE repo_id = ${repoId} ${status === undefined ? sql`` : sql`AND status = ${status}`}
            AND ${Keyset.after(sql, key, page.after)}
          ${Keyset.orderBy(sql, key)} ${Keyset.limitPlusOne(sql, page)}`.pipe(Effect.map((rows) => Keyset.keyed(rows, key)))
      },
      get: (repoId, name) =>
        sql<BranchRecord>`SELECT ${branchColumns(sql)} FROM branches WHERE repo_id = ${repoId} AND name = ${name}`.pipe(
          Effect.map((rows) => rows[0])
        ),
      recordRead: Effect.fnUntraced(function*(repoId, name, reader) {
        // A read receipt is bookkeeping about a caller, not branch state: one idempotent upsert, outside the entity.
        yield* sql`INSERT INTO branch_reads ${sql.insert({ repo_id: repoId, branch: name, reader })}
          ON CONFLICT (repo_id, branch, reader) DO UPDATE SET read_at = now()`
        const rows = yield* sql<{ reader: string; read_at: Date }>`SELECT reader, read_at FROM branch_reads
          WHERE repo_id = ${repoId} AND branch = ${name} AND reader <> ${reader} ORDER BY read_at DESC LIMIT 100`
        return rows.map((r) => ({ name: r.reader, readAt: r.read_at instanceof Date ? r.read_at : new Date(r.read_at) }))
      })
    })
  }))
}
