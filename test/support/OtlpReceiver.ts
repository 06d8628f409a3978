/**
 * A local OTLP/HTTP trace receiver for tests: `POST /v1/traces` with the OTLP JSON body Effect's
 * exporter sends (`OtlpSerialization.layerJson`; ops/Tracing.ts configures JSON). Every span is kept
 * with its resource's attributes; anything else (another path, protobuf, a body that is not OTLP
 * JSON) answers 400 and is counted, so a test sees an exporter that sends what it should not.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  /** OTLP's numbers: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number
  /** Epoch nanoseconds, as decimal strings. */
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes: Readonly<Record<string, unknown>>
  /** The exporting process's resource attributes (`service.name`, `service.instance.id`, ...). */
  readonly resource: Readonly<Record<string, unknown>>
}

export interface OtlpReceiver {
  /** The base URL to give as `--otlp-endpoint`. */
  readonly url: string
  readonly spans: () => ReadonlyArray<ReceivedSpan>
  /** Export requests received (well-formed or not). */
  readonly requests: () => number
  readonly rejected: () => ReadonlyArray<string>
  readonly close: () => Promise<void>
}

interface KeyValue {
  readonly key: string
  readonly value: Record<string, unknown>
}

const valueOf = (value: Record<string, unknown>): unknown => {
  if ("stringValue" in value) return value.stringValue
  if ("boolValue" in value) return value.boolValue
  if ("intValue" in value) return Number(value.intValue)
  if ("doubleValue" in value) return value.doubleValue
  if ("arrayValue" in value) return ((value.arrayValue as { values?: Array<Record<string, unknown>> }).values ?? []).map(valueOf)
  return value
}

const attributesOf = (list: ReadonlyArray<KeyValue> | undefined) =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, valueOf(kv.value)]))

export const startOtlpReceiver = async (): Promise<OtlpReceiver> => {
  const spans: Array<ReceivedSpan> = []
  const rejected: Array<string> = []
  let requests = 0
  const server = http.createServer((request, response) => {
    const parts: Array<Buffer> = []
    request.on("data", (part: Buffer) => parts.push(part))
    request.on("end", () => {
      requests++
      const reject = (why: string) => {
        rejected.push(why)
        response.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ error: why }))
      }
      if (request.method !== "POST" || request.url !== "/v1/traces") return reject(`${request.method} ${request.url}`)
      if (!String(request.headers["content-type"]).startsWith("application/json")) return reject(`content-type ${request.headers["content-type"]}`)
      let body: { resourceSpans?: Array<{ resource?: { attributes?: Array<KeyValue> }; scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }> }> }
      try {
        body = JSON.parse(Buffer.concat(parts).toString("utf8"))
      } catch {
        return reject("not JSON")
      }
      if (!Array.isArray(body.resourceSpans)) return reject("no resourceSpans")
      for (const resourceSpan of body.resourceSpans) {
        const resource = attributesOf(resourceSpan.resource?.attributes)
        for (const scope of resourceSpan.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              traceId: String(span.traceId),
              spanId: String(span.spanId),
              parentSpanId: typeof span.parentSpanId === "string" && span.parentSpanId !== "" ? span.parentSpanId : undefined,
              name: String(span.name),
              kind: Number(span.kind),
              startTimeUnixNano: String(span.startTimeUnixNano),
              endTimeUnixNano: String(span.endTimeUnixNano),
              attributes: attributesOf(span.attributes as Array<KeyValue> | undefined),
              resource
            })
          }
        }
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => spans,
    requests: () => requests,
    rejected: () => rejected,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** A span and its ancestors within `spans`, the span first and the trace's root last. */
export const lineage = (spans: ReadonlyArray<ReceivedSpan>, span: ReceivedSpan): Array<ReceivedSpan> => {
  const byId = new Map(spans.map((s) => [s.spanId, s]))
  const line = [span]
  for (let parent = span.parentSpanId; parent !== undefined;) {
    const found = byId.get(parent)
    if (found === undefined || line.includes(found)) break
    line.push(found)
    parent = found.parentSpanId
  }
  return line
}
