/**
 * Routes for operators, outside the API: `/healthz` (the process lives: no I/O), `/readyz` (this node can
 * serve: each check named, as `database:ping`), both unauthenticated and cheap; `/metrics` in Prometheus'
 * text format, answered only with the `--metrics-token` bearer token (404 without one configured).
 */
import { EntityRuntime } from "@grove/bus"
import { ObjectStore } from "@grove/storage"
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { SqlClient } from "effect/sql"
import { timingSafeEqual } from "node:crypto"
import { ServerConfig } from "../Config.ts"
import { Drain } from "./Drain.ts"
import * as Metrics from "./Metrics.ts"
import { commandSide } from "./Readiness.ts"

const CHECK_TIMEOUT = "2 seconds"
/** A key no object has: asking for it reaches the store and finds nothing. */
const PROBE_KEY = { namespace: "grove-readyz", hash: "0".repeat(64) }

interface Check {
  readonly name: string
  readonly ok: boolean
  readonly detail?: string
}

const probe = <E, R>(name: string, effect: Effect.Effect<unknown, E, R>): Effect.Effect<Check, never, R> =>
  effect.pipe(
    Effect.timeout(CHECK_TIMEOUT),
    Effect.as<Check>({ name, ok: true }),
    Effect.catchCause((cause) => Effect.succeed<Check>({ name, ok: false, detail: String(cause).split("\n")[0] ?? "" }))
  )

const json = (status: number, body: unknown) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers: { "cache-control": "no-store" } })

const healthz = HttpRouter.add("GET", "/healthz", Effect.succeed(json(200, { status: "ok" })))

const readyz = HttpRouter.add("GET", "/readyz", Effect.gen(function*() {
  const drain = yield* Drain
  const sql = yield* SqlClient.SqlClient
  const store = yield* ObjectStore.ObjectStore
  const runtime = yield* EntityRuntime.EntityRuntime
  // Nothing else is asked once the node is stopping.
  if (drain.draining()) {
    return json(503, { status: "unavailable", checks: [{ name: "node:serving", ok: false, detail: "the node is stopping" }] })
  }
  const [database, objects] = yield* Effect.all([
    probe("database:ping", sql`SELECT 1`),
    probe("object-store:ping", store.has(PROBE_KEY))
  ], { concurrency: 2 })
  const side = commandSide(runtime.health())
  const bus: Check = side.ready || side.check !== "bus" ? { name: "bus:reachable", ok: true } : { name: "bus:reachable", ok: false, detail: side.why }
  const partitions: Check = side.ready
    ? { name: "partitions:served", ok: true, detail: side.role === "client" ? "client-only node" : `${side.partitions.length} partitions` }
    : side.check === "bus"
    ? { name: "partitions:served", ok: false, detail: "unknown while the bus cannot be reached" }
    : { name: "partitions:served", ok: false, detail: side.why }
  const checks = [database, objects, bus, partitions]
  const ok = checks.every((check) => check.ok)
  return json(ok ? 200 : 503, { status: ok ? "ok" : "unavailable", checks })
}))

const tokenMatches = (header: string | undefined, token: string) => {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header)
  if (match === null) return false
  const given = Buffer.from(match[1]!)
  const expected = Buffer.from(token)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

const metrics = HttpRouter.add("GET", "/metrics", Effect.gen(function*() {
  const config = yield* ServerConfig
  const request = yield* HttpServerRequest.HttpServerRequest
  const token = config.metricsToken
  if (token === undefined) return json(404, { error: "metrics are off: start the server with --metrics-token", code: "not_found" })
  if (!tokenMatches(request.headers["authorization"], token)) {
    return json(401, { error: "the metrics need the --metrics-token bearer token", code: "unauthenticated" })
  }
  return HttpServerResponse.text(yield* Metrics.scrape, {
    contentType: "text/plain; version=0.0.4; charset=utf-8",
    headers: { "cache-control": "no-store" }
  })
}))

export const OpsRoutes = Layer.mergeAll(healthz, readyz, metrics)
