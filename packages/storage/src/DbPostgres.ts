/**
 * The cluster database: a PostgreSQL server reached by URL with a connection pool.
 */
import { PgClient } from "@effect/sql-pg"
import { type Layer, Redacted } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"

export interface DbPostgresOptions {
  readonly url: string
  readonly maxConnections?: number | undefined
}

export const layer = (options: DbPostgresOptions): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError> =>
  PgClient.layer({
    url: Redacted.make(options.url),
    maxConnections: options.maxConnections ?? 10,
    applicationName: "grove"
  })
