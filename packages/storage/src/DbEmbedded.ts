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

/**
 * PostgreSQL's defaults size memory for a server of its own (shared_buffers 128MB, work_mem 4MB,
 * wal_buffers 4MB); inside this process they cost resident memory the embedded server keeps. Measured
 * on a restarted embedded server, idle: 459 MiB RSS with the defaults, 346 MiB with these.
 */
export const MEMORY_SETTINGS: ReadonlyArray<string> = ["shared_buffers=16MB", "work_mem=1MB", "wal_buffers=64kB"]

const openPglite = (options: DbEmbeddedOptions) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () =>
        PGlite.create({
          dataDir: options.dataDir ?? "memory://",
          startParams: [...PGlite.defaultStartParams, ...MEMORY_SETTINGS.flatMap((setting) => ["-c", setting])]
        }),
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
