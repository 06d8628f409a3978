/**
 * Trace context across the bus: a request carries the W3C `traceparent` of the span that sent it (in
 * the record's headers, on Kafka and on the in-process bus alike), and the node that handles it opens
 * its span as that span's child, so one trace follows a command from the HTTP request on one node to
 * its transaction on another.
 *
 * Tracing is off unless the server configures an exporter (the server's `ops/Tracing.ts` sets
 * `References.TracerEnabled`); while it is off these helpers add no header and open no span.
 */
import { Context, Effect, Option, References, Tracer } from "effect"
import { Headers, HttpTraceContext } from "effect/http"

/** The header, as W3C Trace Context names it. */
export const TRACEPARENT = "traceparent"

/** The current span's `traceparent` header, or none while tracing is off or no span is open. */
export const outgoing: Effect.Effect<Readonly<Record<string, string>>> = Effect.withFiber((fiber) => {
  if (!fiber.getRef(References.TracerEnabled)) return Effect.succeed({})
  const span = Context.getOrUndefined(fiber.context, Tracer.ParentSpan)
  if (span === undefined || span._tag !== "Span" || !span.sampled) return Effect.succeed({})
  return Effect.succeed({ [TRACEPARENT]: HttpTraceContext.toHeaders(span)[TRACEPARENT]! })
})

/** The sender's span, from a record's headers, when it carries a valid `traceparent`. */
export const incoming = (headers: Readonly<Record<string, string>>): Tracer.ExternalSpan | undefined => {
  const value = headers[TRACEPARENT]
  return value === undefined
    ? undefined
    : Option.getOrUndefined(HttpTraceContext.w3c(Headers.fromRecordUnsafe({ [TRACEPARENT]: value })))
}

/** `Effect.withSpan`, only while tracing is on: off, the effect runs as it is (no span object at all). */
export const span = (name: string, options: Tracer.SpanOptions) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.withFiber<A, E, R>((fiber) =>
    fiber.getRef(References.TracerEnabled) ? Effect.withSpan(effect, name, options) : effect
  )
