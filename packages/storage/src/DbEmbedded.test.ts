import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as DbEmbedded from "./DbEmbedded.ts"

// One PGlite for the suite: starting one takes tens of seconds on a busy machine.
describe("DbEmbedded", () => {
  it.layer(DbEmbedded.layer({}), { timeout: 120_000 })((it) => {
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
      }))

    // Concurrent queries reach PGlite pipelined, several in one write: each gets its own answer, and one
    // that fails in the middle fails alone.
    it.effect("answers pipelined queries each with its own rows, a failing one alone", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const results = yield* Effect.forEach(Array.from({ length: 200 }, (_, i) => i), (i) =>
          // Query 77 divides by zero.
          sql<{ v: number }>`SELECT ${i}::int / ${i === 77 ? 0 : 1}::int AS v`.pipe(
            Effect.map((rows) => rows[0]?.v),
            Effect.catchTag("SqlError", () => Effect.succeed("failed"))
          ), { concurrency: "unbounded" })
        assert.deepStrictEqual(results, Array.from({ length: 200 }, (_, i) => i === 77 ? "failed" : i))
        const after = yield* sql<{ v: number }>`SELECT 42 AS v`
        assert.strictEqual(after[0]?.v, 42)
      }))

    it.effect("starts with the embedded memory settings", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const shown = yield* Effect.forEach(DbEmbedded.MEMORY_SETTINGS, (setting) =>
          sql.unsafe<{ value: string }>(`SELECT current_setting('${setting.split("=")[0]}') AS value`).pipe(
            Effect.map((rows) => `${setting.split("=")[0]}=${rows[0]?.value}`)
          ))
        assert.deepStrictEqual(shown, [...DbEmbedded.MEMORY_SETTINGS])
      }))
  })
})
