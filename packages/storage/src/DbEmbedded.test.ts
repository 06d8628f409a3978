import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as DbEmbedded from "./DbEmbedded.ts"

describe("DbEmbedded", () => {
  it.effect("runs queries and transactions on in-process PGlite", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL)`
      yield* Effect.forEach([1, 2, 3], (i) => sql`INSERT INTO t ${sql.insert({ id: i, v: `v${i}` })}`, {
        concurrency: "unbounded"
      })
      const rolled = yield* sql.withTransaction(
        Effect.gen(function*() {
          yield* sql`INSERT INTO t ${sql.insert({ id: 4, v: "v4" })}`
          return yield* Effect.fail("abort" as const)
        })
      ).pipe(Effect.flip)
      assert.strictEqual(rolled, "abort")
      const rows = yield* sql<{ id: number; v: string }>`SELECT id, v FROM t ORDER BY id`
      assert.deepStrictEqual(rows.map((r) => r.id), [1, 2, 3])
    }).pipe(Effect.provide(DbEmbedded.layer({}))), { timeout: 60_000 })
})
