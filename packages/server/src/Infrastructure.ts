/**
 * The one place where the mode chooses infrastructure: PGlite, the in-process
 * bus and local files (embedded), or PostgreSQL, Kafka and S3 (cluster).
 */
import { EntityRuntime, MemoryBus } from "@grove/bus"
import type * as KafkaBusModule from "@grove/bus/KafkaBus"
import { DbEmbedded, DbPostgres, Migrations, ObjectStore, ObjectStoreLocal, ObjectStoreS3 } from "@grove/storage"
import { Duration, Effect, Layer } from "effect"
import * as path from "node:path"
import type { ServerConfigShape } from "./Config.ts"
import { applicationName, instrumentObjectStore } from "./ops/Metrics.ts"

/** The database of the mode, as it is (`grove-server migrate` migrates it). */
export const connectionLayer = (config: ServerConfigShape) =>
  config.mode === "embedded"
    ? DbEmbedded.layer({ dataDir: path.join(config.dataDir, "db") })
    // Named per node, so /metrics finds this node's connections in pg_stat_activity.
    : DbPostgres.layer({ url: config.databaseUrl!, applicationName: applicationName(config.nodeId) })

/**
 * The database of the mode, at this version's schema: migrated at start (`--migrations auto`), or
 * waited for until `grove-server migrate` has run (`wait`). A newer schema is refused either way.
 */
export const databaseLayer = (config: ServerConfigShape) =>
  Migrations.layerFor(config.migrations ?? "auto").pipe(Layer.provideMerge(connectionLayer(config)), Layer.orDie)

/**
 * The bus of the mode. Kafka's heartbeat interval is KafkaBus's default: a third of the session timeout.
 * The Kafka client is imported only in cluster mode: loading it costs an embedded node about 37 MiB and 2 s.
 */
export const busLayer = (config: ServerConfigShape) =>
  config.mode === "embedded"
    ? MemoryBus.layerEmbedded({ nodeId: config.nodeId })
    : Layer.unwrap(Effect.promise(() => import("@grove/bus/KafkaBus")).pipe(Effect.map((KafkaBus: typeof KafkaBusModule) => KafkaBus.layer({
      nodeId: config.nodeId,
      bootstrap: config.kafkaBrokers,
      prefix: config.kafkaPrefix,
      sessionTimeout: Duration.millis(config.kafkaSessionTimeoutMs),
      drainTimeout: Duration.millis(config.drainTimeoutMs ?? 5000)
    }))))

/** Where content bytes live: files in the data directory, or an S3 bucket; each operation timed (ops/Metrics.ts). */
export const objectStoreLayer = (config: ServerConfigShape) =>
  Layer.effect(ObjectStore.ObjectStore, Effect.gen(function*() {
    return instrumentObjectStore(yield* ObjectStore.ObjectStore)
  })).pipe(
    Layer.provide(storeOfMode(config))
  )

const storeOfMode = (config: ServerConfigShape) =>
  config.mode === "embedded"
    ? ObjectStoreLocal.layer({ root: path.join(config.dataDir, "objects") }).pipe(Layer.orDie)
    : ObjectStoreS3.layer({
      endpoint: config.s3.endpoint!,
      region: config.s3.region,
      bucket: config.s3.bucket,
      accessKeyId: config.s3.accessKeyId ?? "",
      secretAccessKey: config.s3.secretAccessKey ?? ""
    })

/** Database, object store, bus and the entity runtime on them. */
export const infrastructureLayer = (config: ServerConfigShape) => {
  const db = databaseLayer(config)
  // One bus (layers are shared by reference): the runtime's, and this node's reader of events.
  const bus = busLayer(config).pipe(Layer.orDie)
  const runtime = EntityRuntime.EntityRuntime.layer({
    timeout: Duration.millis(config.commandTimeoutMs),
    // The in-process bus loses what it held when the process ends: writes still in flight then are settled as failed.
    settleInFlightOnStart: config.mode === "embedded"
  }).pipe(
    Layer.provide(bus),
    Layer.provide(db),
    Layer.orDie
  )
  return Layer.mergeAll(db, runtime, bus, objectStoreLayer(config))
}
