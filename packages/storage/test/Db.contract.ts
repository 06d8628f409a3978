/**
 * The behaviour the app relies on from `Db`, whichever database is behind it:
 * embedded PGlite (one connection) or a real PostgreSQL (a pool). Migrations
 * here are test-local records, never the app's.
 */
import { assert, describe, layer } from "@effect/vitest"
import type { Vitest } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"

type Migrations = Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>>

const ddl = (statement: string): Effect.Effect<void, unknown, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)).pipe(Effect.asVoid)

const migrate = (table: string, migrations: Migrations) =>
  Migrator.make({})({ loader: Migrator.fromRecord(migrations), table })

/** The tables the other tests use, created by an idempotent migration run. */
const schema = migrate("contract_schema_migrations", {
  "1_items": ddl("CREATE TABLE contract_items (id text PRIMARY KEY, note text NOT NULL)"),
  "2_docs": ddl("CREATE TABLE contract_docs (id text PRIMARY KEY, version integer NOT NULL, body text NOT NULL)"),
  "3_values": ddl("CREATE TABLE contract_values (id text PRIMARY KEY, data jsonb NOT NULL, n bigint NOT NULL)")
})

const uid = () => randomBytes(8).toString("hex")

/** Fails rather than hangs: a deadlock must show up as a failure. */
const within = <A, E, R>(effect: Effect.Effect<A, E, R>, what: string) =>
  Effect.timeoutOrElse(effect, {
    duration: "30 seconds",
    orElse: () => Effect.die(new Error(`${what} did not finish within 30 s (deadlock?)`))
  })

export const dbContract = <R, E>(
  name: string,
  dbLayer: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient | R, E>,
  options: { readonly timeout?: number } = {},
  extra?: (it: Vitest.MethodsNonLive<PgClient.PgClient | SqlClient.SqlClient | R>) => void
) =>
  layer(dbLayer, { excludeTestServices: true, timeout: options.timeout ?? 120_000 })(`Db contract: ${name}`, (it) => {
    it.effect("runs migrations once, even with concurrent runners", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const suffix = uid()
        const migrations: Migrations = {
          "1_first": ddl(`CREATE TABLE m_first_${suffix} (id integer PRIMARY KEY)`),
          "2_second": ddl(`ALTER TABLE m_first_${suffix} ADD COLUMN note text`)
        }
        const table = `m_record_${suffix}`
        const runs = yield* Effect.all([migrate(table, migrations), migrate(table, migrations)], {
          concurrency: "unbounded"
        })
        assert.deepStrictEqual(runs.flat().map(([id, name]) => `${id}_${name}`).sort(), ["1_first", "2_second"])
        assert.deepStrictEqual(yield* migrate(table, migrations), [])
        const recorded = yield* sql<{ migration_id: number }>`SELECT migration_id FROM ${sql(table)} ORDER BY 1`
        assert.deepStrictEqual(recorded.map((row) => row.migration_id), [1, 2])
        yield* sql`INSERT INTO ${sql(`m_first_${suffix}`)} (id, note) VALUES (1, 'ok')`

        // A later migration is applied on the next run; a failing one is rolled back and not recorded.
        const more: Migrations = { ...migrations, "3_bad": ddl("CREATE TABLE") }
        const failed = yield* Effect.flip(migrate(table, more))
        assert.strictEqual(failed._tag, "MigrationError")
        const after = yield* sql<{ migration_id: number }>`SELECT migration_id FROM ${sql(table)} ORDER BY 1`
        assert.deepStrictEqual(after.map((row) => row.migration_id), [1, 2])
      }))

    it.effect("transactions commit, roll back on failure, and nest with savepoints", () =>
      Effect.gen(function*() {
        yield* schema
        const sql = yield* SqlClient.SqlClient
        const [a, b, c, d] = [uid(), uid(), uid(), uid()]
        yield* sql.withTransaction(sql`INSERT INTO contract_items ${sql.insert({ id: a, note: "committed" })}`)
        const rolledBack = yield* Effect.flip(sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO contract_items ${sql.insert({ id: b, note: "rolled back" })}`
          return yield* Effect.fail("abort" as const)
        })))
        assert.strictEqual(rolledBack, "abort")
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO contract_items ${sql.insert({ id: c, note: "outer" })}`
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`INSERT INTO contract_items ${sql.insert({ id: d, note: "inner" })}`
            return yield* Effect.fail("inner abort" as const)
          })).pipe(Effect.ignore)
        }))
        const rows = yield* sql<{ id: string }>`SELECT id FROM contract_items WHERE id IN ${sql.in([a, b, c, d])}`
        assert.deepStrictEqual(rows.map((row) => row.id).sort(), [a, c].sort())
      }))

    it.effect("compare-and-set: exactly one of N concurrent updaters wins", () =>
      Effect.gen(function*() {
        yield* schema
        const sql = yield* SqlClient.SqlClient
        for (let round = 0; round < 5; round++) {
          const id = uid()
          yield* sql`INSERT INTO contract_docs ${sql.insert({ id, version: 0, body: "initial" })}`
          const results = yield* within(
            Effect.forEach(Array.from({ length: 12 }, (_, i) => i), (i) =>
              sql<{ version: number }>`
                UPDATE contract_docs SET version = version + 1, body = ${`writer ${i}`}
                WHERE id = ${id} AND version = ${0}
                RETURNING version`.pipe(Effect.map((rows) => ({ i, won: rows.length === 1 }))), {
              concurrency: "unbounded"
            }),
            "concurrent updates"
          )
          const winners = results.filter((r) => r.won)
          assert.strictEqual(winners.length, 1)
          const [doc] = yield* sql<{ version: number; body: string }>`SELECT version, body FROM contract_docs WHERE id = ${id}`
          assert.deepStrictEqual(doc, { version: 1, body: `writer ${winners[0]?.i}` })
        }
      }))

    it.effect("a unique violation is a typed SqlError reason the app can map to 409", () =>
      Effect.gen(function*() {
        yield* schema
        const sql = yield* SqlClient.SqlClient
        const id = uid()
        const insert = sql`INSERT INTO contract_items ${sql.insert({ id, note: "first" })}`
        yield* insert
        const error = yield* Effect.flip(insert)
        assert.strictEqual(error._tag, "SqlError")
        assert.strictEqual(error.reason._tag, "UniqueViolation")
        if (error.reason._tag === "UniqueViolation") assert.strictEqual(error.reason.constraint, "contract_items_pkey")
        const status = yield* insert.pipe(
          Effect.as(201),
          Effect.catchReason("SqlError", "UniqueViolation", () => Effect.succeed(409))
        )
        assert.strictEqual(status, 409)
        // The connection is still usable after the error.
        const [row] = yield* sql<{ note: string }>`SELECT note FROM contract_items WHERE id = ${id}`
        assert.strictEqual(row?.note, "first")
      }))

    it.effect("jsonb and bigint round-trip", () =>
      Effect.gen(function*() {
        yield* schema
        const sql = yield* SqlClient.SqlClient
        const pg = yield* PgClient.PgClient
        const data = {
          name: "grove",
          nested: { list: [1, "two", null, true, 2.5], empty: {} },
          text: "ünïcode 🌳 \"quoted\" \\ back",
          big: 9007199254740991
        }
        for (const n of [9223372036854775807n, -9223372036854775808n, 0n, 42n]) {
          const id = uid()
          yield* sql`INSERT INTO contract_values (id, data, n) VALUES (${id}, ${pg.json(data)}, ${n})`
          const [row] = yield* sql<{ data: unknown; n: bigint; name: string }>`
            SELECT data, n, data->>'name' AS name FROM contract_values WHERE id = ${id}`
          assert.deepStrictEqual(row?.data, data)
          assert.strictEqual(row?.n, n)
          assert.strictEqual(row?.name, "grove")
        }
      }))

    it.effect("many concurrent queries and transactions finish (no deadlock on one connection)", () =>
      Effect.gen(function*() {
        yield* schema
        const sql = yield* SqlClient.SqlClient
        const prefix = uid()
        const work = Array.from({ length: 120 }, (_, i) =>
          i % 6 === 0
            ? sql.withTransaction(Effect.gen(function*() {
              yield* sql`INSERT INTO contract_items ${sql.insert({ id: `${prefix}-${i}-a`, note: "tx" })}`
              yield* sql`INSERT INTO contract_items ${sql.insert({ id: `${prefix}-${i}-b`, note: "tx" })}`
            }))
            : i % 2 === 0
            ? sql`INSERT INTO contract_items ${sql.insert({ id: `${prefix}-${i}`, note: "auto" })}`.pipe(Effect.asVoid)
            : sql<{ n: number }>`SELECT ${i}::int AS n`.pipe(
              Effect.flatMap(([row]) => row?.n === i ? Effect.void : Effect.die(new Error(`cross-talk: ${i} got ${row?.n}`)))
            ))
        yield* within(Effect.all(work, { concurrency: "unbounded", discard: true }), "the concurrent mix")
        const [count] = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM contract_items WHERE id LIKE ${`${prefix}-%`}`
        assert.strictEqual(count?.n, 20 * 2 + 40)
      }))

    if (extra !== undefined) describe("implementation details", () => extra(it))
  })
