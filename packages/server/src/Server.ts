/**
 * The whole server for one configuration: HTTP on the configured address, the
 * admin socket and data-directory lock in embedded mode, the domain services,
 * the entity runtime and the infrastructure of the mode.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Console, Effect, Layer } from "effect"
import { HttpServer } from "effect/http"
import { SqlClient } from "effect/sql"
import * as AdminSocket from "./admin/AdminSocket.ts"
import * as DataDirLock from "./admin/DataDirLock.ts"
import { DomainLive, HttpAppLive } from "./App.ts"
import { drainingServer, type RequestGate } from "./http/DrainingServer.ts"
import { FastReadsLive } from "./fast-reads/FastReads.ts"
import * as Drain from "./ops/Drain.ts"
import { IdleGcLive } from "./ops/IdleGc.ts"
import * as Logging from "./ops/Logging.ts"
import * as Tracing from "./ops/Tracing.ts"
import { AccessNotificationsLive } from "./cache/AccessNotifications.ts"
import { CiDispatcherLive } from "./ci/CiDispatcher.ts"
import { CiTriggersLive } from "./ci/CiTriggers.ts"
import { WebhookDeliveryLive } from "./webhooks/WebhookDelivery.ts"
import { WebhookFanoutLive } from "./webhooks/WebhookFanout.ts"
import { ServerConfig, type ServerConfigShape } from "./Config.ts"
import { EntitiesLive } from "./Entities.ts"
import { EmbeddedAutovacuum } from "./housekeeping/EmbeddedAutovacuum.ts"
import { GcLive } from "./housekeeping/GcRun.ts"
import { infrastructureLayer } from "./Infrastructure.ts"

const banner = Effect.gen(function*() {
  // Requiring the HTTP server orders this after it is listening.
  yield* HttpServer.HttpServer
  const config = yield* ServerConfig
  const sql = yield* SqlClient.SqlClient
  const users = yield* sql<{ count: string }>`SELECT count(*)::text AS count FROM users`.pipe(
    Effect.map((rows) => Number(rows[0]?.count ?? 0)),
    Effect.orElseSucceed(() => 1)
  )
  yield* Console.log(`Grove (${config.mode}) listening on ${config.siteUrl}  node=${config.nodeId}`)
  if (config.mode === "embedded") yield* Console.log(`Data directory: ${config.dataDir}`)
  if (users === 0) {
    yield* Console.log(
      [
        "",
        "No users yet. Create the first one (prints its API key) and set a password for browser sign-in:",
        `  npx grove-server user create <name> --admin${config.mode === "embedded" ? ` --data-dir ${config.dataDir}` : ""}`,
        `  npx grove-server user passwd <name>${config.mode === "embedded" ? ` --data-dir ${config.dataDir}` : ""}`,
        "Then sign in with the client (`npm install -g ./packages/cli` puts grove on the PATH; see the README):",
        `  grove login --remote ${config.siteUrl}`,
        ""
      ].join("\n")
    )
  }
})

export const serverLayer = (config: ServerConfigShape) => {
  const ConfigLive = Layer.succeed(ServerConfig, config)
  // Draining from SIGTERM on (/readyz 503), while the listener stays open for --shutdown-delay-ms.
  const drain = Drain.make()
  const embedded = config.mode === "embedded"
  const Lock = embedded ? Layer.effectDiscard(DataDirLock.acquire(config.dataDir)) : Layer.empty
  const Infra = infrastructureLayer(config).pipe(Layer.provide(Lock))
  // An operator-wide quota replaces each organization's (but one an instance admin set for it alone) and is the
  // default for new ones; applied before the banner.
  const quota = config.orgQuotaBytes === undefined ? Effect.void : Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE organizations SET quota_bytes = ${config.orgQuotaBytes!} WHERE NOT quota_custom`
    yield* sql.unsafe(`ALTER TABLE organizations ALTER COLUMN quota_bytes SET DEFAULT ${config.orgQuotaBytes!}`)
  }).pipe(Effect.orDie)
  const Banner = Layer.effectDiscard(Effect.andThen(quota, banner))
  // Hot reads answered before the app when all they need is cached (fast-reads/), set once the domain is up.
  const gate: RequestGate = { answer: undefined }
  const Http = Layer.mergeAll(HttpAppLive, Banner, FastReadsLive(gate)).pipe(
    // A SIGTERM under keep-alive load stops at once: see DrainingServer.
    Layer.provide(NodeHttpServer.layer(
      drainingServer(config.drainTimeoutMs, { closeDelayMs: config.shutdownDelayMs, onClosing: drain.begin, gate }),
      { host: config.host, port: config.port }
    ))
  )
  const Admin = embedded ? Layer.effectDiscard(AdminSocket.serve(config.dataDir)) : Layer.empty
  // PGlite has no autovacuum worker (cluster PostgreSQL has its own).
  const Autovacuum = embedded ? EmbeddedAutovacuum.live : Layer.empty
  // Body limits: none here. Each request's route sets its own (http/BodyLimits.ts); a value provided
  // here would be captured by the API's handlers and override the route's.
  // The CI runners and the automatic triggers start after the HTTP server and the entities.
  const Ci = Layer.mergeAll(CiDispatcherLive, CiTriggersLive)
  const Deliveries = Layer.mergeAll(WebhookFanoutLive, WebhookDeliveryLive)
  // Garbage collection and retention, every --gc-interval-seconds.
  return Layer.mergeAll(Http, Admin, AccessNotificationsLive, Ci, Deliveries, GcLive, IdleGcLive, Autovacuum).pipe(
    Layer.provide(EntitiesLive),
    Layer.provideMerge(DomainLive),
    Layer.provideMerge(Infra),
    Layer.provideMerge(Drain.layer(drain)),
    Layer.provideMerge(ConfigLive),
    Layer.provide(Logging.layer(config.logFormat ?? "json")),
    // Outermost, for every fiber of the node: off (no spans at all) unless an OTLP endpoint is set.
    Layer.provide(Tracing.layer(config))
  )
}
