/**
 * OpenTelemetry traces through Effect's own OTLP exporter, OFF unless an endpoint is configured
 * (`--otlp-endpoint`, or OpenTelemetry's `OTEL_EXPORTER_OTLP_ENDPOINT`; see Config.ts).
 *
 * Off, `References.TracerEnabled` is false for the whole server: Effect makes no span objects (the
 * HTTP middleware and `Effect.fn` check it first) and the bus adds no `traceparent` header.
 *
 * On, every span goes to the collector as OTLP/HTTP JSON, batched every 2 s, flushed at shutdown:
 * the HTTP server span of each request (continuing a caller's `traceparent`), the `Effect.fn` spans
 * of the handlers, `EntityRuntime.send` on the requesting node, and on the node that owns the
 * partition `EntityRuntime.command` (the sender's child, through the record's `traceparent`) with its
 * `sql.transaction` and statements and `EntityRuntime.reply`. The resource names the node:
 * `service.name` grove, `service.instance.id` the node id.
 */
import { Layer, References } from "effect"
import { FetchHttpClient, type HttpServerRequest, HttpMiddleware } from "effect/http"
import { OtlpSerialization, OtlpTracer } from "effect/observability"
import type { ServerConfigShape } from "../Config.ts"
import { SERVER_VERSION } from "../Version.ts"

/** Operators' probes and scrapes would be most of the spans and tell nothing. */
const UNTRACED = ["/healthz", "/readyz", "/metrics"]

const untraced = (request: HttpServerRequest.HttpServerRequest) => UNTRACED.some((path) => request.url.startsWith(path))

/** Server spans are named `http.server <METHOD>`; the route template is their `http.route` attribute (ops/RequestLog.ts). */
const spanName = (request: HttpServerRequest.HttpServerRequest) => `http.server ${request.method}`

export const layer = (config: Pick<ServerConfigShape, "otlpTracesUrl" | "otlpHeaders" | "nodeId">): Layer.Layer<never> => {
  if (config.otlpTracesUrl === undefined) return Layer.succeed(References.TracerEnabled, false)
  const exporter = OtlpTracer.layer({
    url: config.otlpTracesUrl,
    resource: { serviceName: "grove", serviceVersion: SERVER_VERSION, attributes: { "service.instance.id": config.nodeId } },
    headers: config.otlpHeaders,
    exportInterval: "2 seconds"
  }).pipe(Layer.provide([OtlpSerialization.layerJson, FetchHttpClient.layer]))
  return Layer.mergeAll(
    exporter,
    Layer.succeed(HttpMiddleware.TracerDisabledWhen, untraced),
    Layer.succeed(HttpMiddleware.SpanNameGenerator, spanName)
  )
}
