/**
 * The database schema: the migrations, and where the database stands against this version.
 *
 * `run` applies what is pending (on PostgreSQL the migrator locks its table, so several processes may
 * run it at once). A node either runs it at start (`auto`, embedded mode's default) or leaves that to
 * `grove-server migrate` and waits for it (`wait`, for rollouts). Either way a node refuses a database
 * migrated by a newer version: it would write rows that version no longer expects.
 */
import { Duration, Effect, Layer, Schema } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { migrations } from "./migrations/index.ts"

const TABLE = "grove_migrations"

export const run = Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: TABLE })

/** The last migration this version knows. */
export const LATEST: number = Math.max(...Object.keys(migrations).map((key) => Number.parseInt(key, 10)))

/** The database was migrated by a newer Grove than this one. */
export class SchemaTooNew extends Schema.TaggedError<SchemaTooNew>()("SchemaTooNew", {
  database: Schema.Number,
  supported: Schema.Number
}) {
  override get message() {
    return `the database schema is at migration ${this.database}, newer than this version of Grove knows ` +
      `(${this.supported}): run the newer version, or restore a backup taken before its migration`
  }
}

/** The last migration applied to the database; 0 for an empty one. */
export const databaseVersion = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [table] = yield* sql<{ found: boolean }>`SELECT to_regclass(${TABLE}) IS NOT NULL AS found`
  if (table?.found !== true) return 0
  const [row] = yield* sql<{ latest: number | null }>`SELECT max(migration_id) AS latest FROM ${sql(TABLE)}`
  return Number(row?.latest ?? 0)
})

/** Fails when the database is newer than this version. */
export const refuseNewer = Effect.gen(function*() {
  const database = yield* databaseVersion
  if (database > LATEST) return yield* new SchemaTooNew({ database, supported: LATEST })
  return database
})

/** Applies the pending migrations; answers the ones applied (`<id>_<name>`) and the version after. */
export const migrate = Effect.gen(function*() {
  yield* refuseNewer
  const applied = yield* run
  return { applied: applied.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}`), version: yield* databaseVersion }
})

/**
 * Waits until the database is at this version's schema (someone runs `grove-server migrate`), saying so
 * at once and then every `remindEvery`; fails at once on a newer one.
 */
export const awaitCurrent = (options: { readonly pollEvery?: Duration.Input; readonly remindEvery?: Duration.Input } = {}) =>
  Effect.gen(function*() {
    const remindMs = Duration.toMillis(Duration.fromInputUnsafe(options.remindEvery ?? "30 seconds"))
    let remindedAt = -Infinity
    for (;;) {
      const database = yield* refuseNewer
      if (database === LATEST) return
      if (Date.now() - remindedAt >= remindMs) {
        remindedAt = Date.now()
        yield* Effect.logWarning(
          `waiting for the database schema: it is at migration ${database}, this version needs ${LATEST}; ` +
            "run `grove-server migrate` (with this node's database settings) once"
        )
      }
      yield* Effect.sleep(options.pollEvery ?? "2 seconds")
    }
  })

export type Mode = "auto" | "wait"

/** At start: apply pending migrations (`auto`) or wait for `grove-server migrate` (`wait`). */
export const layerFor = (mode: Mode): Layer.Layer<never, SchemaTooNew | unknown, SqlClient.SqlClient> =>
  Layer.effectDiscard(mode === "auto" ? migrate : awaitCurrent())

/** Applies pending migrations at start (a newer database is refused). */
export const layer: Layer.Layer<never, never, SqlClient.SqlClient> = Layer.effectDiscard(migrate.pipe(Effect.orDie))
