/**
 * The embedded database: PGlite in this process, persisted under a directory
 * (or in memory), reached through `@effect/sql-pg` with one connection.
 */
import { PGlite } from "@electric-sql/pglite"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { SqlClient } from "effect/sql"
import { ConnectionError, SqlError } from "effect/sql/SqlError"
import { MAX_MESSAGE_SIZE } from "./PgMessages.ts"
import * as PgliteInit from "./PgliteInit.ts"
import { pgliteStream } from "./PgliteStream.ts"

export interface DbEmbeddedOptions {
  /** A directory to persist to, or `undefined` for a database in memory. */
  readonly dataDir?: string | undefined
}

/**
 * PostgreSQL's defaults size memory for a server of its own (shared_buffers 128MB, work_mem 4MB,
 * wal_buffers 4MB); inside this process they cost resident memory the embedded server keeps. Measured
 * on a restarted embedded server, idle: 459 MiB RSS with the defaults, 346 MiB with these. Tried, not taken:
 * shared_buffers=8MB held 8 MiB less WebAssembly memory, idle and after three 50 MiB pushes and a clone alike
 * (scripts/bench/memory-pushes.ts), but serialized merges on a 5,000-file tree measured ~10% more server CPU
 * per merge (4 alternating pairs at load 13-17: too noisy to call either way).
 */
export const MEMORY_SETTINGS: ReadonlyArray<string> = ["shared_buffers=16MB", "work_mem=1MB", "wal_buffers=64kB"]

/** PGlite's start parameters with the memory settings: the first start's child and every open use the same. */
export const START_PARAMS: ReadonlyArray<string> = [...PGlite.defaultStartParams, ...MEMORY_SETTINGS.flatMap((setting) => ["-c", setting])]

/**
 * A directory's first creation (initdb) runs in a child process (PgliteInit.ts): this process then opens
 * it as on a restart, without the WebAssembly memory initdb grew. In memory, PGlite runs initdb itself.
 */
const openPglite = (options: DbEmbeddedOptions) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        if (options.dataDir !== undefined) await PgliteInit.initialize(options.dataDir, START_PARAMS)
        return await PGlite.create({ dataDir: options.dataDir ?? "memory://", startParams: [...START_PARAMS] })
      },
      catch: (cause) =>
        new SqlError({ reason: new ConnectionError({ cause, message: "could not open the embedded database" }) })
    }),
    (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
  )

/**
 * The embedded database's `NOTIFY`s, delivered in this process: a handler runs as the notifying
 * transaction commits, before its COMMIT answers. The session must `LISTEN` on the channel (one SQL
 * statement through the client: the session is the one connection, so it is never held for it).
 */
export class Notifications extends Context.Service<Notifications, {
  /** Calls `handler` with the payload of each notification on `channel`, until the returned function is called. */
  readonly subscribe: (channel: string, handler: (payload: string) => void) => () => void
}>()("@grove/storage/DbEmbedded/Notifications") {}

const makeNotifications = () => {
  const handlers = new Map<string, Set<(payload: string) => void>>()
  const service = Notifications.of({
    subscribe: (channel, handler) => {
      const set = handlers.get(channel) ?? new Set()
      handlers.set(channel, set)
      set.add(handler)
      return () => void set.delete(handler)
    }
  })
  const emit = (channel: string, payload: string) => {
    for (const handler of handlers.get(channel) ?? []) {
      try {
        handler(payload)
      } catch (error) {
        // A subscriber's failure must not break the connection's stream.
        console.error(`a handler of notifications on ${channel} failed`, error)
      }
    }
  }
  return { service, emit }
}

export const layer = (
  options: DbEmbeddedOptions
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient | Notifications, SqlError> =>
  Layer.unwrap(
    Effect.map(openPglite(options), (db) => {
      const notifications = makeNotifications()
      return Layer.merge(
        PgClient.layer({
          stream: pgliteStream(db, notifications.emit),
          username: "postgres",
          database: "postgres",
          maxConnections: 1,
          multiplex: true,
          maxMessageSize: MAX_MESSAGE_SIZE
        }),
        Layer.succeed(Notifications, notifications.service)
      )
    })
  )
