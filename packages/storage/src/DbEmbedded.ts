/**
 * The embedded database: PGlite in this process, persisted under a directory
 * (or in memory), reached through `@effect/sql-pg` with one connection.
 */
import { PGlite } from "@electric-sql/pglite"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import type { SqlClient } from "effect/sql"
import { ConnectionError, SqlError } from "effect/sql/SqlError"
import { pgliteStream } from "./PgliteStream.ts"

export interface DbEmbeddedOptions {
  /** A directory to persist to, or `undefined` for a database in memory. */
  readonly dataDir?: string | undefined
}

const openPglite = (options: DbEmbeddedOptions) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => PGlite.create(options.dataDir ?? "memory://"),
      catch: (cause) =>
        new SqlError({ reason: new ConnectionError({ cause, message: "could not open the embedded database" }) })
    }),
    (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
  )

export const layer = (options: DbEmbeddedOptions): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError> =>
  Layer.unwrap(
    Effect.map(openPglite(options), (db) =>
      PgClient.layer({
        stream: pgliteStream(db),
        username: "postgres",
        database: "postgres",
        maxConnections: 1,
        multiplex: true
      }))
  )
