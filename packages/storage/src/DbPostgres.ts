/**
 * The cluster database: a PostgreSQL server reached by URL with a connection pool.
 */
import { PgClient } from "@effect/sql-pg"
import { type Duration, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { MAX_MESSAGE_SIZE } from "./PgMessages.ts"

export interface DbPostgresOptions {
  /** `postgres://user:password@host:port/database`; keep it `Redacted` when it comes from config. */
  readonly url: string | Redacted.Redacted<string>
  /** Pool size of this node; default 10. Mind the server's `max_connections` across all nodes. */
  readonly maxConnections?: number | undefined
  readonly minConnections?: number | undefined
  /** Default 10 seconds. */
  readonly connectTimeout?: Duration.Input | undefined
  readonly idleTimeout?: Duration.Input | undefined
  /** Shown in `pg_stat_activity`; default `grove`. */
  readonly applicationName?: string | undefined
}

const client = (options: DbPostgresOptions) =>
  PgClient.layer({
    url: Redacted.isRedacted(options.url) ? options.url : Redacted.make(options.url),
    maxConnections: options.maxConnections ?? 10,
    applicationName: options.applicationName ?? "grove",
    connectTimeout: options.connectTimeout ?? "10 seconds",
    maxMessageSize: MAX_MESSAGE_SIZE,
    ...(options.minConnections === undefined ? {} : { minConnections: options.minConnections }),
    ...(options.idleTimeout === undefined ? {} : { idleTimeout: options.idleTimeout })
  })

/**
 * The pool connects lazily; one query at start makes a wrong URL or password fail the node's start, not its first
 * request. A fresh layer per call: a shared constant would be memoized and skipped for a second database.
 */
const checkConnection = () => Layer.effectDiscard(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`))

/** Fails to build (a typed `SqlError`: `AuthenticationError`, `ConnectionError`, ...) when the database is not usable. */
export const layer = (options: DbPostgresOptions): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError> =>
  Layer.provideMerge(checkConnection(), client(options))
