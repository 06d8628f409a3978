/**
 * Per request, before routing: a request id (the `X-Request-Id` a proxy sent, when it is a plain token,
 * else a new one; sent back in the response), the HTTP metrics (requests by method, route template and
 * status; time to the response's headers by method and route template) and the access-log line.
 *
 * Kept cheap for the hot read path: the metric series of a route are made once and found from the
 * router's own route object; the id is a process tag and a counter; the record is one small object.
 */
import { MetricHandles } from "@grove/bus"
import { Context, Effect, Layer, Tracer } from "effect"
import { HttpEffect, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Metric } from "effect"
import { randomBytes } from "node:crypto"
import { ServerConfig } from "../Config.ts"
import { type AccessLogWriter, writer } from "./AccessLog.ts"
import { attach, recordIn, type RequestRecordShape } from "../http/RequestRecord.ts"

const requestsTotal = MetricHandles.counterSeries("grove_http_requests_total", "HTTP requests answered, by method, route template and status")
const requestSeconds = MetricHandles.histogramSeries(
  "grove_http_request_duration_seconds",
  "Time from a request's arrival to its response's headers, by method and route template"
)

/** Requests no route matched share one label, so unknown paths cannot grow the series without bound. */
export const UNMATCHED = "(unmatched)"

interface RouteSeries {
  readonly seconds: Metric.Histogram<number>
  readonly byStatus: Map<number, Metric.Counter<number>>
}

const seriesOf = new WeakMap<object, RouteSeries>()
const unmatchedSeries = new Map<string, RouteSeries>()

const routeSeries = (route: object | undefined, method: string, path: string): RouteSeries => {
  const found = route === undefined ? unmatchedSeries.get(method) : seriesOf.get(route)
  if (found !== undefined) return found
  const made: RouteSeries = {
    seconds: requestSeconds(`${method} ${path}`, () => ({ method, route: path })),
    byStatus: new Map()
  }
  if (route === undefined) unmatchedSeries.set(method, made)
  else seriesOf.set(route, made)
  return made
}

const countRequest = (series: RouteSeries, method: string, path: string, status: number) => {
  let counter = series.byStatus.get(status)
  if (counter === undefined) {
    counter = requestsTotal(`${method} ${path} ${status}`, () => ({ method, route: path, status: String(status) }))
    series.byStatus.set(status, counter)
  }
  counter.updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)
}

const processTag = randomBytes(4).toString("hex")
let sequence = 0
const PLAIN_ID = /^[A-Za-z0-9._:-]{1,128}$/

export const requestId = (incoming: string | undefined) =>
  incoming !== undefined && PLAIN_ID.test(incoming) ? incoming : `${processTag}-${(++sequence).toString(36)}`

const bodyBytes = (response: HttpServerResponse.HttpServerResponse): number | undefined => {
  const body = response.body
  return body._tag === "Empty" ? 0 : "contentLength" in body ? body.contentLength : undefined
}

/**
 * What every answered request records, whoever answered it (this middleware, or fast-reads/ before the
 * Effect app): the route's metric series and the access-log line. `route`: the router's matched route.
 */
export const recordAnswer = (
  log: AccessLogWriter | undefined,
  answer: {
    readonly record: RequestRecordShape
    readonly method: string
    readonly status: number
    readonly seconds: number
    readonly bytes: number | undefined
    readonly traceId?: string | undefined
  }
): string => {
  const { record, method } = answer
  const matched = record.route
  const path = matched?.path ?? UNMATCHED
  const series = routeSeries(matched, method, path)
  series.seconds.updateUnsafe(answer.seconds, MetricHandles.DEFAULT_CONTEXT)
  countRequest(series, method, path, answer.status)
  log?.write({
    requestId: record.id,
    method,
    route: path,
    status: answer.status,
    seconds: answer.seconds,
    bytes: answer.bytes,
    caller: record.caller,
    traceId: answer.traceId
  })
  return path
}

export const requestLog = (log: AccessLogWriter | undefined) =>
  HttpRouter.middleware(
    (app) =>
      Effect.withFiber((fiber) => {
        const started = performance.now()
        const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
        const record: RequestRecordShape = { id: requestId(request.headers["x-request-id"]), caller: undefined, route: undefined }
        attach(request, record)
        // The HTTP server span (only while tracing is on) learns its route template once routing is done.
        const span = Context.getOrUndefined(fiber.context, Tracer.ParentSpan)
        HttpEffect.appendPreResponseHandlerUnsafe(fiber.context, (_request, response) => {
          const traced = span?._tag === "Span" ? span : undefined
          const path = recordAnswer(log, {
            record,
            method: request.method,
            status: response.status,
            seconds: (performance.now() - started) / 1000,
            bytes: bodyBytes(response),
            traceId: traced?.traceId
          })
          traced?.attribute("http.route", path)
          return Effect.succeed(HttpServerResponse.setHeader(response, "x-request-id", record.id))
        })
        return app
      }),
    { global: true }
  )

/** One access-log writer per format for the process: the middleware and fast-reads/ batch into the same one. */
const writers = new Map<string, AccessLogWriter>()
export const accessLogWriter = (format: "json" | "text"): AccessLogWriter => {
  let found = writers.get(format)
  if (found === undefined) writers.set(format, found = writer(format))
  return found
}

/** The middleware, writing the access log in the configured format. */
export const RequestLogLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* ServerConfig
  return requestLog(accessLogWriter(config.logFormat ?? "json"))
}))

/**
 * The innermost global middleware: notes the matched route on the request's record as the route's
 * handler ends, while the router's context is still the fiber's (the middlewares around it restore
 * their own contexts on the way out).
 */
export const RouteNoteLive = HttpRouter.middleware(
  (app) =>
    Effect.withFiber((fiber) => {
      const record = recordIn(fiber.context)
      if (record === undefined) return app
      return Effect.onExit(app, () =>
        Effect.withFiber((inner) => {
          record.route = Context.getOrUndefined(inner.context, HttpRouter.RouteContext)?.route
          return Effect.void
        }))
    }),
  { global: true }
)
