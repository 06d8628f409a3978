import { describe, expect, it } from "@effect/vitest"
import { TraceContext } from "@grove/bus"
import { Effect, References } from "effect"
import { ConfigError, parseConfig } from "../Config.ts"
import * as Tracing from "./Tracing.ts"

describe("tracing settings", () => {
  it("are off without any setting", () => {
    expect(parseConfig([], {}).otlpTracesUrl).toBeUndefined()
  })

  it("take --otlp-endpoint as a collector's base URL, and OpenTelemetry's variables under it", () => {
    expect(parseConfig(["--otlp-endpoint", "http://collector:4318"], {}).otlpTracesUrl).toBe("http://collector:4318/v1/traces")
    expect(parseConfig([], { GROVE_OTLP_ENDPOINT: "https://otel.example/base/" }).otlpTracesUrl).toBe("https://otel.example/base/v1/traces")
    expect(parseConfig([], { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }).otlpTracesUrl).toBe("http://c:4318/v1/traces")
    // The signal's own variable is the full URL.
    expect(parseConfig([], { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/custom", OTEL_EXPORTER_OTLP_ENDPOINT: "http://d" }).otlpTracesUrl)
      .toBe("http://c:4318/custom")
    expect(parseConfig(["--otlp-endpoint", "http://g"], { OTEL_EXPORTER_OTLP_ENDPOINT: "http://d" }).otlpTracesUrl).toBe("http://g/v1/traces")
    expect(parseConfig([], { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }).otlpTracesUrl).toBeUndefined()
    expect(parseConfig([], { OTEL_EXPORTER_OTLP_HEADERS: "api-key=abc%3D,x=1" }).otlpHeaders).toEqual({ "api-key": "abc=", x: "1" })
  })

  it("refuse what is not an http(s) URL, naming the setting", () => {
    expect(() => parseConfig(["--otlp-endpoint", "collector:4318"], {})).toThrow(ConfigError)
    expect(() => parseConfig([], { OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/)
  })
})

describe("tracing off", () => {
  it.effect("disables the tracer, so no span exists and the bus carries no traceparent", () =>
    Effect.gen(function*() {
      expect(yield* References.TracerEnabled).toBe(false)
      const headers = yield* TraceContext.outgoing.pipe(Effect.withSpan("a request"))
      expect(headers).toEqual({})
      // TraceContext.span adds none either.
      const inside = yield* Effect.currentSpan.pipe(TraceContext.span("a command", {}), Effect.option)
      expect(inside._tag === "None" || inside.value.name !== "a command").toBe(true)
    }).pipe(Effect.provide(Tracing.layer({ otlpTracesUrl: undefined, nodeId: "n" }))))

  it.effect("on, the bus carries the current span's W3C traceparent and the receiver continues that trace", () =>
    Effect.gen(function*() {
      const [headers, sender] = yield* Effect.all([TraceContext.outgoing, Effect.currentSpan]).pipe(Effect.withSpan("a request"))
      expect(headers.traceparent).toBe(`00-${sender.traceId}-${sender.spanId}-01`)
      const parent = TraceContext.incoming(headers)!
      const child = yield* Effect.currentSpan.pipe(TraceContext.span("a command", { parent }))
      expect(child.traceId).toBe(sender.traceId)
      expect(child.parent._tag === "Some" && child.parent.value.spanId).toBe(sender.spanId)
      expect(TraceContext.incoming({ traceparent: "garbage" })).toBeUndefined()
    }))
})
