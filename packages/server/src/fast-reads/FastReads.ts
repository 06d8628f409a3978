/**
 * The hot read `GET /api/{owner}/{name}` answered at the node request listener, before the Effect HTTP
 * app, when everything it needs is already in memory: the caller's token row, the repository record and
 * the caller's role are cached (the same caches, forgotten on the same change notifications,
 * cache/AccessCaches.ts) and access is allowed. Anything else (a miss, a denial, a bad key, a header the
 * app would treat differently, a query string, a body, tracing on, draining) goes to the app untouched,
 * which also fills the caches for the next request.
 *
 * Derived from the contract, not beside it: the route template and the success schema are
 * `GroveApi`'s endpoint; the body is that schema's encoding (as the app's HttpApiBuilder does:
 * encode, then JSON.stringify) of the handler's own value (`Authorizer`, `toApiRepository`), kept per
 * cached (record, role). A path is served here only after the app's router has answered it 200 from
 * that very endpoint (its matched route, from the request's record): no second router to drift.
 * What the app adds to every answer is added here the same way: `x-request-id`, `nosniff`, the route's
 * metrics and the access-log line (ops/RequestLog.recordAnswer).
 */
import { GroveApi } from "@grove/api"
import { Effect, Layer, Schema } from "effect"
import type { HttpApiEndpoint } from "effect/http-api"
import type * as http from "node:http"
import { MetricHandles } from "@grove/bus"
import { Authorizer } from "../access/Authorizer.ts"
import { Identity } from "../access/Identity.ts"
import { toApiRepository } from "../access/RepositoryRecord.ts"
import { anonymous, BEARER } from "../http/Authentication.ts"
import type { RequestGate } from "../http/DrainingServer.ts"
import { callerLabel, recordOfSource, type RequestRecordShape } from "../http/RequestRecord.ts"
import { accessLogWriter, recordAnswer, requestId } from "../ops/RequestLog.ts"
import { ServerConfig } from "../Config.ts"

const served = MetricHandles.counterSeries("grove_http_fast_reads_total", "Requests answered before the HTTP app from cached access data, by route template")

/** Path segments served here: a name or slug (anything else, percent-encoding included, goes to the app). */
const PLAIN_SEGMENT = /^[A-Za-z0-9._-]+$/
/** Paths learned at most; past it the table starts again (each path is learned again by one app answer). */
const MAX_LEARNED = 10_000
/** Accept headers that ask for what the endpoint sends anyway. */
const PLAIN_ACCEPT = new Set(["*/*", "application/json"])
/** Request headers the app may act on for a read (conditions, ranges, upgrades): such a request goes to the app. */
const UNUSUAL_HEADERS = ["if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range", "upgrade", "expect", "transfer-encoding"]

/** The endpoint's template as a matcher: the path's parameters by name, or undefined when it does not match. */
const templateOf = (path: string) => {
  const parts = path.split("/")
  return (pathname: string): Record<string, string> | undefined => {
    const segments = pathname.split("/")
    if (segments.length !== parts.length) return undefined
    const params: Record<string, string> = {}
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!
      const segment = segments[i]!
      if (part.startsWith(":")) {
        if (!PLAIN_SEGMENT.test(segment)) return undefined
        params[part.slice(1)] = segment
      } else if (part !== segment) return undefined
    }
    return params
  }
}

/** The endpoint's one success schema, encoded the way HttpApiBuilder encodes a JSON body. */
const bodyEncoder = (endpoint: HttpApiEndpoint.Top) => {
  const schemas = [...endpoint.success]
  if (schemas.length !== 1) throw new Error(`fast read ${endpoint.name}: needs exactly one success schema`)
  // The API's schemas need no services to encode (the app's encoder runs them with none either).
  const encode = Schema.encodeUnknownSync(schemas[0]! as Schema.Codec<unknown, unknown>)
  const bodies = new WeakMap<object, Buffer>()
  return (value: object): Buffer => {
    let body = bodies.get(value)
    if (body === undefined) bodies.set(value, body = Buffer.from(JSON.stringify(encode(value))))
    return body
  }
}

const plainRequest = (request: http.IncomingMessage): boolean => {
  const headers = request.headers
  const length = headers["content-length"]
  if (length !== undefined && length !== "0") return false
  const accept = headers.accept
  if (accept !== undefined && !PLAIN_ACCEPT.has(accept)) return false
  for (const name of UNUSUAL_HEADERS) if (headers[name] !== undefined) return false
  return true
}

/** The request gate's answer for the repository read; installed while the layer lives. */
export const FastReadsLive = (gate: RequestGate) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const config = yield* ServerConfig
    // Off by switch, and while tracing: the app's server span would be missing.
    if (config.fastReads === false || config.otlpTracesUrl !== undefined) return
    const identity = yield* Identity
    const authorizer = yield* Authorizer
    const log = accessLogWriter(config.logFormat ?? "json")
    const endpoint: HttpApiEndpoint.Top = GroveApi.groups.repos.endpoints.get
    const match = templateOf(endpoint.path)
    const encode = bodyEncoder(endpoint)
    const counter = served(endpoint.path, () => ({ route: endpoint.path }))
    /** Paths the app's router answered from this endpoint, with its matched route (the metrics' series). */
    const learned = new Map<string, { readonly path: string }>()

    // By host and path: the app may route by host too (organization sites, sites/SiteServing.ts).
    const learnFrom = (request: http.IncomingMessage, response: http.ServerResponse, key: string) =>
      response.once("finish", () => {
        const route = recordOfSource(request)?.route
        if (response.statusCode !== 200 || route?.path !== endpoint.path) return
        if (learned.size >= MAX_LEARNED) learned.clear()
        learned.set(key, route)
      })

    const answer = (request: http.IncomingMessage, response: http.ServerResponse): boolean => {
      if (request.method !== "GET") return false
      const url = request.url
      if (url === undefined || url.includes("?")) return false
      const params = match(url)
      if (params === undefined || !plainRequest(request)) return false
      const key = `${request.headers.host ?? ""}${url}`
      const route = learned.get(key)
      if (route === undefined) {
        learnFrom(request, response, key)
        return false
      }
      const started = performance.now()
      const header = request.headers.authorization
      let caller = anonymous
      if (header !== undefined && header !== "") {
        const token = BEARER.exec(header)?.[1]
        const cached = token === undefined ? undefined : identity.cachedCaller(token)
        if (cached === undefined) return false
        caller = cached
      }
      const repo = authorizer.cachedRepository(caller, params.owner!, params.name!, "read")
      if (repo === undefined) return false
      const body = encode(toApiRepository(repo))
      const record: RequestRecordShape = { id: requestId(request.headers["x-request-id"] as string | undefined), caller: callerLabel(caller.principal), route }
      response.writeHead(200, {
        "content-type": "application/json",
        "content-length": body.length,
        "x-request-id": record.id,
        "x-content-type-options": "nosniff"
      })
      recordAnswer(log, { record, method: "GET", status: 200, seconds: (performance.now() - started) / 1000, bytes: body.length })
      counter.updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)
      response.end(body)
      return true
    }

    yield* Effect.acquireRelease(
      Effect.sync(() => {
        gate.answer = answer
      }),
      () =>
        Effect.sync(() => {
          gate.answer = undefined
        })
    )
  }))
