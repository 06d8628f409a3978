/**
 * `--webhook-allow`, the operator's way to reach receivers on an internal network: a receiver on
 * 127.0.0.1 is refused without it, and delivered to with it, by network (`127.0.0.1/32`) and by
 * host name (resolved by a DNS server the test controls); the list is shown at start, and what is
 * beside it stays refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type FakeDns, startFakeDns } from "../support/FakeDns.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"
import { type Receiver, startReceiver } from "../support/WebhookReceiver.ts"

let plain: GroveServer
let allowing: GroveServer
let receiver: Receiver
let dns: FakeDns
const keys = new Map<GroveServer, string>()
const as = (server: GroveServer) => api(server.url, keys.get(server))

beforeAll(async () => {
  receiver = await startReceiver()
  dns = await startFakeDns()
  dns.set("hooks.corp.test", "127.0.0.1")
  dns.set("elsewhere.corp.test", "127.0.0.2")
  const env = { GROVE_DNS_SERVERS: dns.address }
  // One after the other: two servers starting at once on a loaded machine may miss the harness's start deadline.
  plain = await startServer({ env })
  allowing = await startServer({ env, args: ["--webhook-allow", "127.0.0.1/32,hooks.corp.test"] })
  for (const server of [plain, allowing]) {
    keys.set(server, await server.createUser("opal"))
    expect((await as(server).post("/repos", { name: "app" })).status).toBe(201)
  }
}, 240_000)

afterAll(async () => {
  await Promise.all([plain?.stop(), allowing?.stop()])
  await receiver?.close()
  await dns?.close()
})

describe("--webhook-allow", () => {
  it("refused without the flag; with it, delivered by network and by host name, and nothing beside them", async () => {
    const url = (host: string, path: string) => `http://${host}:${receiver.port}${path}`
    for (const host of ["127.0.0.1", "hooks.corp.test"]) {
      const refused = await as(plain).post("/opal/app/webhooks", { url: url(host, "/plain") })
      expect(refused.status, host).toBe(400)
      expect(refused.body.code).toBe("address_not_allowed")
    }

    expect(allowing.output()).toContain("(--webhook-allow): 127.0.0.1/32, hooks.corp.test")
    expect(plain.output()).not.toContain("--webhook-allow")
    expect((await as(allowing).post("/opal/app/webhooks", { url: url("127.0.0.1", "/by-network"), events: ["branch.created"] })).status).toBe(201)
    expect((await as(allowing).post("/opal/app/webhooks", { url: url("hooks.corp.test", "/by-name"), events: ["branch.created"] })).status).toBe(201)
    for (const host of ["127.0.0.2", "elsewhere.corp.test", "localhost"]) {
      expect((await as(allowing).post("/opal/app/webhooks", { url: url(host, "/beside") })).status, host).toBe(400)
    }

    const c = buildCommit({ branch: "feature", files: { "a.txt": "a\n" } })
    const pushed = await as(allowing).post("/opal/app/push", pushBody({ branch: "feature", commits: [c] }))
    expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
    for (const path of ["/by-network", "/by-name"]) {
      const delivered = await waitFor(`the delivery to ${path}`, async () => receiver.received.find((r) => r.path === path))
      expect(JSON.parse(delivered.raw.toString("utf8"))).toMatchObject({ event: "branch.created", branch: "feature", commit: c.commit.hash })
    }
    expect(receiver.received.filter((r) => r.path === "/plain" || r.path === "/beside")).toEqual([])
  }, 90_000)
})
