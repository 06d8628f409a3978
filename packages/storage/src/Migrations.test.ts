import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Logger } from "effect"
import { SqlClient } from "effect/sql"
import * as DbEmbedded from "./DbEmbedded.ts"
import * as Migrations from "./Migrations.ts"
import { migrations } from "./migrations/index.ts"

describe("Migrations", () => {
  it.effect("migrate applies every migration once and answers the version", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* Migrations.databaseVersion, 0)
      const first = yield* Migrations.migrate
      assert.deepStrictEqual(first.applied, Object.keys(migrations))
      assert.strictEqual(first.version, Migrations.LATEST)
      const again = yield* Migrations.migrate
      assert.deepStrictEqual(again, { applied: [], version: Migrations.LATEST })
    }).pipe(Effect.provide(DbEmbedded.layer({}))), { timeout: 120_000 })

  // jsonb parsed a 5,000-file push's list (~1 MiB) into a tree inside PGlite: its WebAssembly memory grew ~9 MiB for
  // good (0017). json keeps the text as sent: key order and all, which jsonb does not.
  it.effect("a commit's file list is stored as json, its text as sent", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* Migrations.migrate
      const column = yield* sql<{ type: string }>`SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute
        WHERE attrelid = 'commits'::regclass AND attname = 'files'`
      assert.strictEqual(column[0]?.type, "json")
      const list = JSON.stringify([{ path: "src/a.ts", blob: "b".repeat(64), mode: "100644" }])
      const kept = yield* sql<{ text: string }>`SELECT CAST(${list} AS json)::text AS text`
      assert.strictEqual(kept[0]?.text, list)
    }).pipe(Effect.provide(DbEmbedded.layer({}))), { timeout: 120_000 })

  it.effect("a database migrated by a newer version is refused, by migrate and by a waiting node", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* Migrations.migrate
      yield* sql`INSERT INTO grove_migrations (migration_id, name) VALUES (${Migrations.LATEST + 1}, 'from_the_future')`
      const refused = yield* Effect.flip(Migrations.migrate)
      assert.strictEqual(refused._tag, "SchemaTooNew")
      assert.include(refused.message, `at migration ${Migrations.LATEST + 1}, newer than this version of Grove knows (${Migrations.LATEST})`)
      const waiting = yield* Effect.flip(Migrations.awaitCurrent())
      assert.strictEqual((waiting as Migrations.SchemaTooNew)._tag, "SchemaTooNew")
    }).pipe(Effect.provide(DbEmbedded.layer({}))), { timeout: 120_000 })

  it.live("a node on an older schema waits, saying why, until migrate has run", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const capture = Logger.make(({ message }) => lines.push(String(Array.isArray(message) ? message.join(" ") : message)))
      const waiter = yield* Migrations.awaitCurrent({ pollEvery: "20 millis" }).pipe(
        Effect.provide(Logger.layer([capture])),
        Effect.forkChild
      )
      // Several polls pass without the node going on.
      yield* Effect.sleep("200 millis")
      assert.isUndefined(waiter.pollUnsafe())
      assert.strictEqual(lines.length, 1)
      assert.include(lines[0], `it is at migration 0, this version needs ${Migrations.LATEST}; run \`grove-server migrate\``)
      yield* Migrations.migrate
      yield* Fiber.join(waiter).pipe(Effect.timeout("30 seconds"))
    }).pipe(Effect.provide(DbEmbedded.layer({}))), { timeout: 120_000 })
})
