/**
 * Runs the migrations once at start. On PostgreSQL the migrator locks its
 * table, so several nodes may start at the same time.
 */
import { Effect, Layer } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { migrations } from "./migrations/index.ts"

export const run = Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: "grove_migrations" })

export const layer: Layer.Layer<never, never, SqlClient.SqlClient> = Layer.effectDiscard(
  run.pipe(Effect.orDie)
)
