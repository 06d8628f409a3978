/**
 * The one place where the mode chooses infrastructure: PGlite, the in-process
 * bus and local files (embedded), or PostgreSQL, Kafka and S3 (cluster).
 */
import { DbEmbedded, DbPostgres, Migrations } from "@grove/storage"
import { Layer } from "effect"
import * as path from "node:path"
import type { ServerConfigShape } from "./Config.ts"

/** The database of the mode, migrated. */
export const databaseLayer = (config: ServerConfigShape) => {
  const db = config.mode === "embedded"
    ? DbEmbedded.layer({ dataDir: path.join(config.dataDir, "db") })
    : DbPostgres.layer({ url: config.databaseUrl! })
  return Migrations.layer.pipe(Layer.provideMerge(db), Layer.orDie)
}

// TEMPORARY until the bus runtime lands.
export const infrastructureLayer = databaseLayer
