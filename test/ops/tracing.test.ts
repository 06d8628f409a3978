/**
 * Traces on an embedded server (the in-process bus): with an OTLP endpoint configured (here through
 * OpenTelemetry's own OTEL_EXPORTER_OTLP_ENDPOINT), one merge is one trace, from the HTTP server span
 * through the send, over the bus's traceparent header, into the entity command and its transaction.
 * With OTEL_SDK_DISABLED=true nothing is sent although an endpoint is set. (That tracing is off with no
 * setting at all is ops/Tracing.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { lineage, type OtlpReceiver, startOtlpReceiver } from "../support/OtlpReceiver.ts"
import { waitFor } from "../support/waitFor.ts"

let receiver: OtlpReceiver
let server: GroveServer | undefined

beforeAll(async () => {
  receiver = await startOtlpReceiver()
}, 60_000)

afterAll(async () => {
  await server?.stop()
  await receiver?.close()
})

describe("tracing on an embedded server", () => {
  it("follows a merge from the HTTP request over the in-process bus into the command's transaction", async () => {
    server = await startServer({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }, args: ["--node-id", "traced-embedded"] })
    // Probes are not traced (checked at the end, once the merge's spans are in).
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    const key = await server.createUser("tara", { admin: true })
    expect((await api(server.url, key).post("/repos", { name: "traced" })).status).toBe(201)
    const c1 = buildCommit({ branch: "topic", files: { "README.md": "traced\n" } })
    const pushed = await api(server.url, key).post("/tara/traced/push", pushBody({ branch: "topic", commits: [c1], description: "Traced" }))
    expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
    const merged = await api(server.url, key).post("/tara/traced/branches/topic/merge")
    expect(merged.status, JSON.stringify(merged.body)).toBe(200)

    // The trace is exported within a couple of seconds (the exporter's interval).
    const found = await waitFor("the merge's command transaction in the merge request's trace", async () => {
      const all = receiver.spans()
      const request = all.find((s) => s.kind === 2 && s.attributes["http.route"] === "/api/:owner/:name/branches/:branch/merge")
      const trace = request === undefined ? [] : all.filter((s) => s.traceId === request.traceId)
      const transaction = trace.find((s) => s.name === "sql.transaction" && lineage(trace, s).some((a) => a.name === "EntityRuntime.command"))
      return request === undefined || transaction === undefined ? undefined : { request, trace, transaction }
    }, 60_000)
    const line = lineage(found.trace, found.transaction)
    // transaction <- command (on the partition's worker) <- send (in the request) <- ... <- the HTTP server span
    const names = line.map((s) => s.name)
    expect(names[0]).toBe("sql.transaction")
    expect(names).toContain("EntityRuntime.command")
    expect(names.indexOf("EntityRuntime.send")).toBe(names.indexOf("EntityRuntime.command") + 1)
    expect(line[line.length - 1]).toBe(found.request)
    expect(found.request.attributes["http.request.method"]).toBe("POST")
    const command = line.find((s) => s.name === "EntityRuntime.command")!
    expect(command.attributes).toMatchObject({ "grove.command": "Merge", "messaging.destination.name": "grove.commands" })
    expect(command.kind).toBe(5)
    // The reply is sent inside the command's span, and the whole trace names this node.
    expect(found.trace.some((s) => s.name === "EntityRuntime.reply" && s.parentSpanId === command.spanId)).toBe(true)
    for (const span of found.trace) expect(span.resource).toMatchObject({ "service.name": "grove", "service.instance.id": "traced-embedded" })
    expect(receiver.spans().filter((s) => JSON.stringify(s.attributes).includes("/healthz"))).toEqual([])
    // The merge's access-log line names its trace.
    const logged = server.output().split("\n").filter((l) => l.includes(`"route":"/api/:owner/:name/branches/:branch/merge"`))
    expect(logged.length, server.output().slice(-2000)).toBe(1)
    expect(JSON.parse(logged[0]!)).toMatchObject({ status: 200, trace_id: found.request.traceId })
    expect(receiver.rejected()).toEqual([])
  }, 300_000)
})
