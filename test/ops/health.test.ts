/**
 * The operator's endpoints on a real embedded server: /healthz and /readyz (each check named),
 * unauthenticated; /readyz answering 503 within 1 s of SIGTERM while the node still serves during
 * --shutdown-delay-ms, then exit 0; /metrics behind --metrics-token with HTTP and entity-command series;
 * the access log (one JSON line per request: method, route template, status, duration, bytes, caller,
 * request id; never the token).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Murmur2 } from "@grove/bus"
import * as fs from "node:fs"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

const METRICS_TOKEN = "scrape-me-0123456789"
let server: GroveServer
let key: string

beforeAll(async () => {
  server = await startServer({ args: ["--metrics-token", METRICS_TOKEN] })
  key = await server.createUser("olive", { admin: true })
}, 240_000)

afterAll(async () => {
  await server?.stop()
})

const scrape = async (url: string, token?: string) => {
  const response = await fetch(`${url}/metrics`, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } })
  return { status: response.status, text: await response.text(), type: response.headers.get("content-type") }
}

/** The value of one Prometheus sample line, found by its name and the labels it must have. */
const sample = (text: string, name: string, labels: Record<string, string>) => {
  const lines = text.split("\n").filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
  const line = lines.find((l) => Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1))
}

describe("health", () => {
  it("serve replaced itself (same pid) with a young generation bounded to 2 x 8 MiB, which keeps an idle node's RSS down", () => {
    const cmdline = fs.readFileSync(`/proc/${server.process.pid}/cmdline`, "utf8").split("\0")
    expect(cmdline).toContain("--max-semi-space-size=8")
    expect(cmdline).toContain("serve")
  })

  it("/healthz says the process lives and /readyz names each check, without a token", async () => {
    const health = await fetch(`${server.url}/healthz`)
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ status: "ok" })
    const ready = await fetch(`${server.url}/readyz`)
    const body = await ready.json() as { status: string; checks: Array<{ name: string; ok: boolean; detail?: string }> }
    expect(ready.status, JSON.stringify(body)).toBe(200)
    expect(body.status).toBe("ok")
    expect(body.checks.map((c) => [c.name, c.ok])).toEqual([
      ["database:ping", true],
      ["object-store:ping", true],
      ["bus:reachable", true],
      ["partitions:served", true]
    ])
    // The API's own health answer is unchanged.
    const apiHealth = await fetch(`${server.url}/api/health`)
    expect(apiHealth.status).toBe(200)
    expect(await apiHealth.json()).toMatchObject({ status: "ok", mode: "embedded", role: "host" })
  })
})

describe("metrics", () => {
  it("are served only with the metrics token", async () => {
    expect((await scrape(server.url)).status).toBe(401)
    expect((await scrape(server.url, "wrong-token-0123456789")).status).toBe(401)
    // A user's API key is not the metrics token.
    expect((await scrape(server.url, key)).status).toBe(401)
    const ok = await scrape(server.url, METRICS_TOKEN)
    expect(ok.status).toBe(200)
    expect(ok.type).toContain("text/plain")
  })

  it("show HTTP requests by route template and status, command latency, the outbox and memory", async () => {
    const created = await api(server.url, key).post("/repos", { name: "metered", is_public: false })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    for (let i = 0; i < 3; i++) expect((await api(server.url, key).get("/olive/metered")).status).toBe(200)
    expect((await api(server.url, key).get("/olive/no-such-repo")).status).toBe(404)

    const { text } = await scrape(server.url, METRICS_TOKEN)
    const reads = sample(text, "grove_http_requests_total", { method: "GET", route: "/api/:owner/:name", status: "200" })
    expect(reads, text).toBeGreaterThanOrEqual(3)
    expect(sample(text, "grove_http_requests_total", { method: "GET", route: "/api/:owner/:name", status: "404" })).toBeGreaterThanOrEqual(1)
    expect(sample(text, "grove_http_request_duration_seconds_count", { method: "GET", route: "/api/:owner/:name" })).toBeGreaterThanOrEqual(4)
    expect(text).toContain("# TYPE grove_http_request_duration_seconds histogram")
    // The repository's creation is an entity command, timed on the partition that ran it.
    expect(sample(text, "grove_entity_commands_total", { entity_type: "Repository", outcome: "success" })).toBeGreaterThanOrEqual(1)
    expect(text).toMatch(/grove_entity_command_duration_seconds_count\{entity_type="Repository",command="[^"]+",partition="\d+"\} [1-9]/)
    expect(text).toMatch(/grove_entity_command_duration_seconds_bucket\{entity_type="Repository",command="[^"]+",partition="\d+",le="\+Inf"\} [1-9]/)
    expect(sample(text, "grove_outbox_pending_events", {})).toBeGreaterThanOrEqual(0)
    expect(sample(text, "grove_process_memory_bytes", { kind: "rss" })).toBeGreaterThan(10 * 1024 * 1024)
    expect(text).toMatch(/grove_object_store_operation_duration_seconds_count\{operation="has",outcome="ok"\} [1-9]/)
    // Consumer lag per group, topic and partition: every command partition of this node, the one that ran the create
    // caught up (the in-process bus: its log's end against the worker's position).
    const lags = [...text.matchAll(/^grove_bus_consumer_lag\{group="grove\.entities",topic="grove\.commands",partition="(\d+)"\} (\d+)$/gm)]
    expect(lags.length, text).toBe(32)
    const createdPartition = Murmur2.partitionFor("olive/metered", 32)
    expect(sample(text, "grove_bus_consumer_lag", { group: "grove.entities", topic: "grove.commands", partition: String(createdPartition) })).toBe(0)
    // The database's round trip, webhook and CI gauges.
    expect(sample(text, "grove_db_ping_duration_seconds", {})).toBeGreaterThan(0)
    expect(sample(text, "grove_webhook_deliveries_pending", {})).toBe(0)
    expect(sample(text, "grove_ci_runs", { status: "queued" })).toBe(0)
    expect(sample(text, "grove_ci_runs", { status: "running" })).toBe(0)
    expect(sample(text, "grove_ci_runner_slots", {})).toBeGreaterThanOrEqual(0)
    expect(sample(text, "grove_ci_runner_slots_busy", {})).toBe(0)
    expect(sample(text, "grove_metrics_scrape_errors_total", {}) ?? 0).toBe(0)
    // Unknown paths share one label.
    await fetch(`${server.url}/no/such/${Date.now()}`)
    const again = (await scrape(server.url, METRICS_TOKEN)).text
    expect(sample(again, "grove_http_requests_total", { method: "GET", route: "(unmatched)", status: "404" })).toBeGreaterThanOrEqual(1)
    expect(again).not.toContain("/no/such/")
  })
})

describe("access log", () => {
  it("writes one JSON line per request with its route template, status, bytes, caller and request id, never the token", async () => {
    const response = await fetch(`${server.url}/api/olive/metered`, {
      headers: { authorization: `Bearer ${key}`, "x-request-id": "trace-abc.123" }
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("x-request-id")).toBe("trace-abc.123")
    const body = await response.text()
    const line = await waitFor("the access-log line", async () =>
      server.output().split("\n").find((l) => l.includes(`"request_id":"trace-abc.123"`)))
    expect(JSON.parse(line)).toMatchObject({
      level: "INFO",
      message: "request",
      request_id: "trace-abc.123",
      method: "GET",
      route: "/api/:owner/:name",
      status: 200,
      bytes: Buffer.byteLength(body),
      caller: "user:olive",
      duration_ms: expect.any(Number)
    })
    // A request id that is not a plain token is replaced by one of the server's own.
    const other = await fetch(`${server.url}/healthz`, { headers: { "x-request-id": "no spaces <allowed>" } })
    expect(other.headers.get("x-request-id")).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/)
    expect(server.output()).not.toContain(key)
  })
})

describe("SIGTERM", () => {
  it("/readyz answers 503 within 1 s while the node still serves during --shutdown-delay-ms, then the node exits 0", async () => {
    const node = await startServer({ args: ["--shutdown-delay-ms", "4000"] })
    try {
      expect((await fetch(`${node.url}/readyz`)).status).toBe(200)
      const exited = new Promise<number | null>((resolve) => node.process.once("exit", (code) => resolve(code)))
      const signalled = Date.now()
      node.process.kill("SIGTERM")
      const firstUnready = await waitFor("a 503 from /readyz", async () => {
        const sent = Date.now()
        const status = await fetch(`${node.url}/readyz`).then((r) => r.status, () => undefined)
        return status === 503 ? sent : undefined
      }, 30_000).catch((error: unknown) => {
        throw new Error(`${String(error)}\nthe node said:\n${node.output()}`)
      })
      expect(firstUnready - signalled).toBeLessThan(1_000)
      // Still serving while load balancers notice.
      expect((await fetch(`${node.url}/healthz`)).status).toBe(200)
      expect(await exited).toBe(0)
      expect(Date.now() - signalled).toBeGreaterThanOrEqual(4_000)
    } finally {
      await node.stop()
    }
  }, 120_000)
})

describe("without a metrics token", () => {
  it("/metrics answers 404", async () => {
    const plain = await startServer()
    try {
      const response = await scrape(plain.url, METRICS_TOKEN)
      expect(response.status).toBe(404)
    } finally {
      await plain.stop()
    }
  }, 240_000)
})
