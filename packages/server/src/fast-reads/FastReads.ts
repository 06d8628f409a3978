/**
 * The hot reads `GET /api/{owner}/{name}` and `GET /api/orgs/{slug}` answered at the node request listener,
 * before the Effect HTTP app, when everything they need is already in memory: the caller's token row, the
 * repository or organization record and the caller's role are cached (the same caches, forgotten on the same change notifications,
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
import { toApiOrganization } from "../access/Organizations.ts"
import { toApiRepository } from "../access/RepositoryRecord.ts"
import type { Caller } from "@grove/api"
import { anonymous, BEARER } from "../http/Authentication.ts"
import type { RequestGate } from "../http/DrainingServer.ts"
import { callerLabel, recordOfSource, type RequestRecordShape } from "../http/RequestRecord.ts"
import { accessLogWriter, recordAnswer, requestId } from "../ops/RequestLog.ts"
import { siteOfHost } from "../sites/SiteServing.ts"
import { ServerConfig } from "../Config.ts"

const served = MetricHandles.counterSeries("grove_http_fast_reads_total", "Requests answered before the HTTP app from cached access data, by route template")
const failures = MetricHandles.counterSeries("grove_http_fast_read_failures_total", "Exceptions in the fast read path (the app answered instead)")("", () => ({}))

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

/**
 * A JSON body kept as text with its UTF-8 length: node writes a string body and the response's head
 * as one string in one write, where a Buffer body takes a second chunk (a writev and its bookkeeping).
 */
interface EncodedBody {
  readonly text: string
  readonly length: number
}

/**
 * The endpoint's one success schema, encoded the way HttpApiBuilder encodes a JSON body, once per
 * `source`: a cached (record, role) answer of the Authorizer, shared and immutable.
 */
const bodyEncoder = <A extends object>(endpoint: HttpApiEndpoint.Top, toApi: (source: A) => unknown) => {
  const schemas = [...endpoint.success]
  if (schemas.length !== 1) throw new Error(`fast read ${endpoint.name}: needs exactly one success schema`)
  // The API's schemas need no services to encode (the app's encoder runs them with none either).
  const encode = Schema.encodeUnknownSync(schemas[0]! as Schema.Codec<unknown, unknown>)
  const bodies = new WeakMap<A, EncodedBody>()
  return (source: A): EncodedBody => {
    let body = bodies.get(source)
    if (body === undefined) {
      const text = JSON.stringify(encode(toApi(source)))
      bodies.set(source, body = { text, length: Buffer.byteLength(text) })
    }
    return body
  }
}

/** One hot read: its endpoint, and its body for a caller when everything is cached and allowed (else undefined). */
interface HotRead {
  readonly endpoint: HttpApiEndpoint.Top
  readonly match: (pathname: string) => Record<string, string> | undefined
  readonly body: (caller: Caller, params: Record<string, string>) => EncodedBody | undefined
  readonly counter: { readonly updateUnsafe: (value: number, context: typeof MetricHandles.DEFAULT_CONTEXT) => void }
}

const hotRead = <A extends object>(
  endpoint: HttpApiEndpoint.Top,
  cached: (caller: Caller, params: Record<string, string>) => A | undefined,
  toApi: (source: A) => unknown
): HotRead => {
  const encode = bodyEncoder(endpoint, toApi)
  return {
    endpoint,
    match: templateOf(endpoint.path),
    body: (caller, params) => {
      const source = cached(caller, params)
      return source === undefined ? undefined : encode(source)
    },
    counter: served(endpoint.path, () => ({ route: endpoint.path }))
  }
}

const plainRequest = (request: http.IncomingMessage): boolean => {
  const headers = request.headers
  const length = headers["content-length"]
  if (length !== undefined && length !== "0") return false
  const accept = headers.accept
  if (accept !== undefined && !PLAIN_ACCEPT.has(accept)) return false
  for (let i = 0; i < UNUSUAL_HEADERS.length; i++) if (headers[UNUSUAL_HEADERS[i]!] !== undefined) return false
  return true
}

/** The request gate's answer for the hot reads; installed while the layer lives. */
export const FastReadsLive = (gate: RequestGate) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const config = yield* ServerConfig
    // Off by switch, and while tracing: the app's server span would be missing.
    if (config.fastReads === false || config.otlpTracesUrl !== undefined) return
    const identity = yield* Identity
    const authorizer = yield* Authorizer
    const log = accessLogWriter(config.logFormat ?? "json")
    const context = yield* Effect.context<never>()
    // The handlers' own answers: the same Authorizer checks, the same API forms.
    const reads: ReadonlyArray<HotRead> = [
      hotRead(
        GroveApi.groups.repos.endpoints.get,
        (caller, params) => authorizer.cachedRepository(caller, params.owner!, params.name!, "read"),
        toApiRepository
      ),
      hotRead(
        GroveApi.groups.orgs.endpoints.get,
        (caller, params) => authorizer.cachedOrganization(caller, params.slug!, "read"),
        (org) => toApiOrganization(org, org.callerRole)
      )
    ]
    /**
     * Paths the app's router answered from one of these endpoints, with its matched route (the metrics'
     * series) and the path's parameters (matched once, when learned, not per request).
     */
    const learned = new Map<string, { readonly route: { readonly path: string }; readonly read: HotRead; readonly params: Record<string, string> }>()

    const learnFrom = (request: http.IncomingMessage, response: http.ServerResponse, pathname: string) =>
      response.once("finish", () => {
        const route = recordOfSource(request)?.route
        const read = reads.find((r) => r.endpoint.path === route?.path)
        const params = read?.match(pathname)
        if (response.statusCode !== 200 || route === undefined || read === undefined || params === undefined) return
        if (learned.size >= MAX_LEARNED) learned.clear()
        learned.set(pathname, { route, read, params })
      })

    const answer = (request: http.IncomingMessage, response: http.ServerResponse): boolean => {
      if (request.method !== "GET") return false
      const url = request.url
      if (url === undefined || url.includes("?") || !plainRequest(request)) return false
      // The app routes by host only for organization sites (from configuration): any other host routes
      // a path alike, so paths are learned by path alone (a client's many Host values cannot churn them).
      if (siteOfHost(request.headers.host, config.sitesDomain) !== undefined) return false
      const found = learned.get(url)
      if (found === undefined) {
        if (reads.some((r) => r.match(url) !== undefined)) learnFrom(request, response, url)
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
      const body = found.read.body(caller, found.params)
      if (body === undefined) return false
      const record: RequestRecordShape = { id: requestId(request.headers["x-request-id"] as string | undefined), caller: callerLabel(caller.principal), route: found.route }
      response.writeHead(200, {
        "content-type": "application/json",
        "content-length": body.length,
        "x-request-id": record.id,
        "x-content-type-options": "nosniff"
      })
      recordAnswer(log, { record, method: "GET", status: 200, seconds: (performance.now() - started) / 1000, bytes: body.length })
      found.read.counter.updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)
      response.end(body.text)
      return true
    }

    yield* Effect.acquireRelease(
      Effect.sync(() => {
        gate.answer = answer
        gate.failed = (error) => {
          failures.updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)
          Effect.runForkWith(context)(Effect.logError("fast read failed; the app answers", error))
        }
      }),
      () =>
        Effect.sync(() => {
          gate.answer = undefined
          gate.failed = undefined
        })
    )
  }))
