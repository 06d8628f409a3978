import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as DbEmbedded from "./DbEmbedded.ts"
import { notificationScanner } from "./PgliteStream.ts"

/** A backend message: its type byte, then its length (itself included) and body. */
const message = (type: string, body: Buffer) => {
  const header = Buffer.alloc(5)
  header.write(type, 0)
  header.writeInt32BE(body.length + 4, 1)
  return Buffer.concat([header, body])
}
const notification = (channel: string, payload: string) =>
  message("A", Buffer.concat([Buffer.from([0, 0, 0, 7]), Buffer.from(`${channel}\0${payload}\0`)]))

describe("notificationScanner", () => {
  it("finds notifications among other messages however the output is cut", () => {
    const output = Buffer.concat([
      message("D", Buffer.alloc(300, 0x41)), // a row full of 'A' bytes is not a notification
      notification("grove_access", "repository:1"),
      message("C", Buffer.from("UPDATE 1\0")),
      notification("other", "x"),
      notification("grove_access", "tokens"),
      message("Z", Buffer.from("I"))
    ])
    for (const size of [1, 2, 3, 5, 7, 64, output.length]) {
      const seen: Array<string> = []
      const scan = notificationScanner((channel, payload) => seen.push(`${channel} ${payload}`))
      for (let i = 0; i < output.length; i += size) scan(new Uint8Array(output.subarray(i, i + size)))
      assert.deepStrictEqual(seen, ["grove_access repository:1", "other x", "grove_access tokens"], `chunks of ${size}`)
    }
  })
})

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

    // A commit adding 100,000 files lists them in one row (~19 MB); the client's default limit (16 MiB)
    // refused it, and every later push to that repository failed.
    it.effect("reads a row larger than 16 MiB", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE big (id int PRIMARY KEY, files jsonb NOT NULL)`
        const files = Array.from({ length: 100_000 }, (_, i) => ({ path: `src/module-${i}/file-${i}.ts`, blob: "b".repeat(128), mode: "100644" }))
        yield* sql`INSERT INTO big ${sql.insert({ id: 1, files: JSON.stringify(files) })}`
        const rows = yield* sql<{ files: string | ReadonlyArray<unknown>; size: number }>`SELECT files, octet_length(files::text) AS size FROM big`
        assert.isAbove(Number(rows[0]!.size), 16 * 1024 * 1024)
        const read = typeof rows[0]!.files === "string" ? JSON.parse(rows[0]!.files) : rows[0]!.files
        assert.strictEqual(read.length, 100_000)
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

    // The caches' exactness rests on this: the handler has run by the time the COMMIT answers, and a
    // transaction that rolls back notifies nothing.
    it.effect("delivers a committed NOTIFY in-process before the commit answers, a rolled-back one never", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const notifications = yield* DbEmbedded.Notifications
        const seen: Array<string> = []
        const unsubscribe = notifications.subscribe("grove_test", (payload) => seen.push(payload))
        yield* sql`LISTEN grove_test`
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT pg_notify('grove_test', 'committed')`
          // Not before the commit.
          assert.deepStrictEqual(seen, [])
        }))
        assert.deepStrictEqual(seen, ["committed"])
        yield* sql.withTransaction(sql`SELECT pg_notify('grove_test', 'rolled back')`.pipe(Effect.andThen(Effect.fail("abort" as const)))).pipe(Effect.flip)
        yield* sql`SELECT pg_notify('grove_test', 'alone')`
        assert.deepStrictEqual(seen, ["committed", "alone"])
        unsubscribe()
        yield* sql`SELECT pg_notify('grove_test', 'after')`
        assert.deepStrictEqual(seen, ["committed", "alone"])
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
