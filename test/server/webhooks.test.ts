/**
 * Webhooks end to end on the embedded server: a real receiver on 127.0.0.1 (let through by the
 * test allow-list, reached by name through a DNS server the test controls) gets the spec's payload
 * with its headers, and openssl verifies every signature over the raw bytes; a receiver that fails
 * twice is retried with the same delivery id; a name that rebinds to a refused address between add
 * and delivery is refused at connection and recorded as skipped; every SSRF form is refused at add;
 * the delivery log and redelivery; access rules.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Murmur2, Topics } from "@grove/bus"
import { buildCommit, pushBody } from "../support/content.ts"
import { type FakeDns, startFakeDns } from "../support/FakeDns.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"
import { opensslHmac, type Receiver, startReceiver } from "../support/WebhookReceiver.ts"

let server: GroveServer
let receiver: Receiver
let dns: FakeDns
let key: string
const as = () => api(server.url, key)
const SECRET = "whsec-0123456789"
let commits = 0
const heads = new Map<string, ReturnType<typeof buildCommit>>()

/** A commit on `branch`: its creation the first time (branch.created), a push after. */
const push = async (branch: string) => {
  const parent = heads.get(branch)
  const c = buildCommit({ branch, files: { [`${branch}.txt`]: `v${++commits}\n` }, parent: parent ?? null })
  const reply = await as().post("/wes/app/push", pushBody({ branch, commits: [c], description: branch, expectedHead: parent?.commit.hash ?? null }))
  expect(reply.body.success, JSON.stringify(reply.body)).toBe(true)
  heads.set(branch, c)
  return c.commit.hash
}

const at = (p: string) => receiver.received.filter((r) => r.path === p)

/** Pushes one commit at a time to branch `f` of the repository at `path` (`owner/name`, which may change). */
const branchPusher = () => {
  let parent: ReturnType<typeof buildCommit> | undefined
  return async (path: string) => {
    const c = buildCommit({ branch: "f", files: { "f.txt": `v${++commits}\n` }, parent: parent ?? null })
    const reply = await as().post(`/${path}/push`, pushBody({ branch: "f", commits: [c], description: "f", expectedHead: parent?.commit.hash ?? null }))
    expect(reply.body.success, JSON.stringify(reply.body)).toBe(true)
    parent = c
  }
}

beforeAll(async () => {
  receiver = await startReceiver()
  dns = await startFakeDns()
  dns.set("receiver.test", "127.0.0.1")
  server = await startServer({
    env: { GROVE_UNSAFE_EGRESS_ALLOW: "127.0.0.1", GROVE_DNS_SERVERS: dns.address, GROVE_WEBHOOK_RETRY_BASE_MS: "300" }
  })
  key = await server.createUser("wes")
  expect((await as().post("/repos", { name: "app" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
  await receiver?.close()
  await dns?.close()
})

describe("webhooks", () => {
  it("warns at start that the test allow-list is on", () => {
    expect(server.output()).toContain("GROVE_UNSAFE_EGRESS_ALLOW is set")
  })

  it("delivers the spec's payload with signed headers that openssl verifies over the raw bytes", async () => {
    const url = `http://receiver.test:${receiver.port}`
    const signed = await as().post("/wes/app/webhooks", { url: `${url}/signed`, secret: SECRET, events: ["push", "merge"] })
    expect(signed.status, JSON.stringify(signed.body)).toBe(201)
    expect(signed.body).toMatchObject({ url: `${url}/signed`, events: ["push", "merge"], has_secret: true, chat: false, created_by: "wes" })
    expect(JSON.stringify(signed.body)).not.toContain(SECRET)
    const all = await as().post("/wes/app/webhooks", { url: `${url}/all`, events: [] })
    expect(all.body).toMatchObject({ events: ["push", "branch.created", "merge"], has_secret: false })
    const listed = await as().get("/wes/app/webhooks")
    expect(listed.body.webhooks.map((h: any) => h.id)).toEqual([signed.body.id, all.body.id])

    const first = await push("feature")
    const second = await push("feature")
    await waitFor("three deliveries", async () => (at("/all").length >= 2 && at("/signed").length >= 1 ? true : undefined))
    // branch.created goes only to the hook with every event; push to both.
    expect(at("/all").map((r) => r.headers["x-service-event"])).toEqual(["branch.created", "push"])
    const delivered = at("/signed")[0]!
    expect(delivered.headers).toMatchObject({
      "content-type": "application/json",
      "user-agent": "service-webhooks/1",
      "x-service-event": "push"
    })
    const body = JSON.parse(delivered.raw.toString("utf8"))
    expect(Object.keys(body)).toEqual(["event", "owner", "repo", "branch", "commit", "pusher", "timestamp"])
    expect(body).toMatchObject({ event: "push", owner: "wes", repo: "app", branch: "feature", commit: second, pusher: "wes" })
    expect(body.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/)
    expect(delivered.headers["x-service-signature-256"]).toBe(opensslHmac(SECRET, delivered.raw))
    const id = String(delivered.headers["x-service-delivery-id"])
    const timestamp = String(delivered.headers["x-service-timestamp"])
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(60)
    expect(delivered.headers["x-service-signature-v2"]).toBe(opensslHmac(SECRET, Buffer.concat([Buffer.from(`${id}.${timestamp}.`), delivered.raw])))
    // Unsigned without a secret; every delivery its own id.
    expect(at("/all")[0]!.headers["x-service-signature-256"]).toBeUndefined()
    const ids = receiver.received.map((r) => r.headers["x-service-delivery-id"])
    expect(new Set(ids).size).toBe(ids.length)
    expect(first).not.toBe(second)

    // A merge: the payload's commit is the squash commit on main.
    const merged = await as().post("/wes/app/branches/feature/merge")
    expect(merged.status, JSON.stringify(merged.body)).toBe(200)
    await waitFor("the merge delivery", async () => (at("/signed").length >= 2 ? true : undefined))
    const merge = at("/signed")[1]!
    expect(JSON.parse(merge.raw.toString("utf8"))).toMatchObject({ event: "merge", branch: "feature", commit: merged.body.commit_hash })
    expect(merge.headers["x-service-signature-256"]).toBe(opensslHmac(SECRET, merge.raw))
  }, 60_000)

  it("retries a receiver that fails twice, with the same delivery id, and logs every attempt", async () => {
    receiver.failFirst("/flaky", 2, 503)
    const hook = await as().post("/wes/app/webhooks", { url: `http://127.0.0.1:${receiver.port}/flaky`, secret: SECRET, events: ["push"] })
    expect(hook.status).toBe(201)
    await push("retry-me")
    await push("retry-me")
    await waitFor("three attempts", async () => (at("/flaky").length >= 3 ? true : undefined), 30_000)
    const attempts = at("/flaky")
    expect(new Set(attempts.map((a) => a.headers["x-service-delivery-id"])).size).toBe(1)
    expect(attempts.every((a) => a.headers["x-service-signature-256"] === opensslHmac(SECRET, a.raw))).toBe(true)
    expect(attempts.every((a) => a.raw.equals(attempts[0]!.raw))).toBe(true)
    const log = await waitFor("the log to say succeeded", async () => {
      const reply = await as().get(`/wes/app/webhooks/${hook.body.id}/deliveries`)
      return reply.body.deliveries[0]?.status === "succeeded" ? reply.body.deliveries : undefined
    })
    expect(log).toHaveLength(1)
    expect(log[0]).toMatchObject({ id: attempts[0]!.headers["x-service-delivery-id"], event: "push", attempts: 3, status_code: 204, error: null })

    // Redelivery: a new delivery of the same body.
    const again = await as().post(`/wes/app/webhooks/${hook.body.id}/deliveries/${log[0].id}/redeliver`)
    expect(again.status, JSON.stringify(again.body)).toBe(202)
    expect(again.body).toMatchObject({ redelivery_of: log[0].id, status: "pending", event: "push" })
    await waitFor("the redelivery", async () => (at("/flaky").length >= 4 ? true : undefined))
    const redelivered = at("/flaky")[3]!
    expect(redelivered.headers["x-service-delivery-id"]).toBe(again.body.id)
    expect(redelivered.raw.equals(attempts[0]!.raw)).toBe(true)
  }, 60_000)

  it("refuses at connection a name that rebinds to a refused address after it was added, and records why", async () => {
    dns.set("rebind.test", "93.184.216.34")
    const hook = await as().post("/wes/app/webhooks", { url: `http://rebind.test:${receiver.port}/rebound`, events: ["push"] })
    expect(hook.status, JSON.stringify(hook.body)).toBe(201)
    dns.set("rebind.test", "127.0.0.2")
    await push("rebinding")
    await push("rebinding")
    const log = await waitFor("the skipped delivery", async () => {
      const reply = await as().get(`/wes/app/webhooks/${hook.body.id}/deliveries`)
      return reply.body.deliveries[0]?.status === "skipped" ? reply.body.deliveries : undefined
    })
    expect(log[0].error).toBe("not delivered: refused at connection: the host resolves to a loopback address")
    expect(at("/rebound")).toHaveLength(0)
  }, 60_000)

  it("refuses every SSRF form at add, naming the rule and no resolution details", async () => {
    dns.set("inside.test", "10.0.0.5")
    const urls = [
      "http://127.0.0.2/", "http://localhost/", "http://localhost./", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://2130706434/",
      "http://0177.0.0.2/", "http://0x7f.0.0.2/", "http://127.2/", "http://169.254.169.254/latest/meta-data", "http://100.64.0.1/",
      "http://198.18.0.1/", "http://224.0.0.1/", "http://255.255.255.255/", "http://0.0.0.0/", "http://[64:ff9b::7f00:1]/",
      "http://[64:ff9b:1::1]/", "http://[2002:7f00:1::1]/", "http://[2001::1]/", "http://[fc00::1]/", "http://[fe80::1]/",
      "ftp://example.com/", "file:///etc/passwd", "http://user:pass@receiver.test/", "http://receiver.test@127.0.0.2/",
      "http://inside.test/", "http://nowhere.test/", "http://metadata.google.internal/"
    ]
    for (const url of urls) {
      const reply = await as().post("/wes/app/webhooks", { url })
      expect(reply.status, url).toBe(400)
      expect(reply.body.code, url).toBe("address_not_allowed")
      expect(reply.body.error, url).not.toMatch(/10\.0\.0\.5/)
    }
  })

  it("a webhook added after the repository's events were fanned out gets the next event; a removed one gets no more", async () => {
    // The fan-out remembers each repository's webhooks per partition: a change must reach it in order.
    expect((await as().post("/repos", { name: "late" })).status).toBe(201)
    const url = `http://receiver.test:${receiver.port}`
    const first = await as().post("/wes/late/webhooks", { url: `${url}/late-first`, events: ["push"] })
    expect(first.status, JSON.stringify(first.body)).toBe(201)
    const pusher = branchPusher()
    const pushLate = () => pusher("wes/late")
    await pushLate() // branch.created: not a push hook's
    await pushLate()
    // Delivered: the fan-out has read (and remembers) the repository's webhooks.
    await waitFor("the first hook's push", async () => (at("/late-first").length >= 1 ? true : undefined))
    const second = await as().post("/wes/late/webhooks", { url: `${url}/late-second`, events: ["push"] })
    expect(second.status, JSON.stringify(second.body)).toBe(201)
    await pushLate()
    await waitFor("the push at both hooks", async () => (at("/late-first").length >= 2 && at("/late-second").length >= 1 ? true : undefined))
    expect((await as().delete(`/wes/late/webhooks/${first.body.id}`)).status).toBe(204)
    await pushLate()
    await waitFor("the last push at the second hook", async () => (at("/late-second").length >= 2 ? true : undefined))
    expect(at("/late-first").length).toBe(2)
  }, 60_000)

  it("a webhook added while the repository was transferred away gets its events once it is transferred back", async () => {
    // Events go by the repository's key owner/name: the two keys must fall in different partitions, where
    // the fan-out of the first would otherwise miss the webhook change made under the second.
    const partitions = Topics.find(Topics.all, Topics.events)!.partitions
    expect(Murmur2.partitionFor("wes/roam", partitions)).not.toBe(Murmur2.partitionFor("away/roam", partitions))
    expect((await as().post("/orgs", { slug: "away", name: "Away" })).status).toBe(201)
    expect((await as().post("/repos", { name: "roam" })).status).toBe(201)
    const url = `http://receiver.test:${receiver.port}`
    expect((await as().post("/wes/roam/webhooks", { url: `${url}/roam-first`, events: ["push"] })).status).toBe(201)
    const push = branchPusher()
    await push("wes/roam") // branch.created
    await push("wes/roam")
    // Delivered: wes/roam's partition remembers the repository's webhooks.
    await waitFor("the first hook's push", async () => (at("/roam-first").length >= 1 ? true : undefined))
    expect((await as().post("/wes/roam/transfer", { to_organization: "away" })).status).toBe(200)
    const second = await as().post("/away/roam/webhooks", { url: `${url}/roam-second`, events: ["push"] })
    expect(second.status, JSON.stringify(second.body)).toBe(201)
    expect((await as().post("/away/roam/transfer", { to_organization: "wes" })).status).toBe(200)
    await push("wes/roam")
    await waitFor("the push at both hooks", async () => (at("/roam-first").length >= 2 && at("/roam-second").length >= 1 ? true : undefined))
    expect(JSON.parse(at("/roam-second")[0]!.raw.toString("utf8"))).toMatchObject({ event: "push", owner: "wes", repo: "roam" })
  }, 120_000)

  it("checks the request and the caller: events, access, removal", async () => {
    expect((await as().post("/wes/app/webhooks", { url: `http://127.0.0.1:${receiver.port}/x`, events: "push" })).status).toBe(400)
    expect((await as().post("/wes/app/webhooks", { url: `http://127.0.0.1:${receiver.port}/x`, events: ["push", "deploy"] })).status).toBe(400)
    expect((await as().post("/wes/app/webhooks", {})).status).toBe(400)
    const readKey = await as().post("/api-keys", { name: "reader", scope: "read" })
    const reader = api(server.url, readKey.body.key)
    // A read-only key of the owner may not see the webhooks either (issue 20 item 5).
    expect((await reader.get("/wes/app/webhooks")).status).toBe(404)
    const denied = await reader.post("/wes/app/webhooks", { url: `http://127.0.0.1:${receiver.port}/x` })
    expect(denied.status).toBe(403)
    expect(denied.body.error).toContain("write")
    const stranger = api(server.url, await server.createUser("stan"))
    expect((await stranger.get("/wes/app/webhooks")).status).toBe(404)
    const hooks = (await as().get("/wes/app/webhooks")).body.webhooks
    expect((await as().delete(`/wes/app/webhooks/${hooks[0].id}`)).status).toBe(204)
    expect((await as().delete(`/wes/app/webhooks/${hooks[0].id}`)).status).toBe(404)
    const audit = JSON.stringify((await as().get("/orgs/wes/audit")).body)
    expect(audit).toContain("webhook.add")
    expect(audit).toContain("webhook.remove")
    expect(audit).not.toContain(SECRET)
  })
})

describe("who sees webhooks (issue 20 item 5)", () => {
  it("shows a public repository's webhooks and delivery log to writers and admins only: anonymous callers and readers get 404", async () => {
    // Organization hooks: wes owns it, walt administers it, wendy is a member (write); rita is no member (reads the public repository).
    const [walt, wendy, rita] = await Promise.all(["walt", "wendy", "rita"].map((name) => server.createUser(name)))
    expect((await as().post("/orgs", { slug: "hooks", name: "Hooks" })).status).toBe(201)
    expect((await as().post("/orgs/hooks/members", { username: "walt", role: "admin" })).status).toBe(201)
    expect((await as().post("/orgs/hooks/members", { username: "wendy" })).status).toBe(201)
    expect((await as().post("/repos", { name: "site", organization_slug: "hooks", is_public: true })).status).toBe(201)
    // A URL whose path and query are the credential, as a chat service's are.
    const url = `http://receiver.test:${receiver.port}/services/T000/B000/SeCrEtPaTh?token=s3cr3t`
    const added = await api(server.url, walt).post("/hooks/site/webhooks", { url, events: ["push"] })
    expect(added.status, JSON.stringify(added.body)).toBe(201)
    const id = added.body.id as string
    const readKey = (await as().post("/api-keys", { name: "hooks reader", scope: "read" })).body.key as string
    const callers: ReadonlyArray<readonly [string, string | undefined, number]> = [
      ["anonymous", undefined, 404],
      ["a reader (no member)", rita, 404],
      ["the owner's read-only key", readKey, 404],
      ["a member (write)", wendy, 200],
      ["an admin", walt, 200],
      ["the owner", key, 200]
    ]
    for (const [who, token, status] of callers) {
      const c = api(server.url, token)
      expect((await c.get("/hooks/site")).status, `${who} reads the repository`).toBe(200)
      const list = await c.get("/hooks/site/webhooks")
      expect(list.status, who).toBe(status)
      const deliveries = await c.get(`/hooks/site/webhooks/${id}/deliveries`)
      expect(deliveries.status, who).toBe(status)
      if (status === 200) {
        expect(list.body.webhooks.map((w: { url: string }) => w.url), who).toEqual([url])
        expect(deliveries.body.deliveries, who).toEqual([])
      } else {
        expect(JSON.stringify(list.body), who).not.toContain("SeCrEtPaTh")
        expect(list.body.code, who).toBe("not_found")
      }
    }
  }, 60_000)
})

describe("the repository's event stream", () => {
  it("streams the repository's events live as server-sent events, to readers only", async () => {
    const stranger = await fetch(`${server.url}/api/wes/app/events`, { headers: { authorization: `Bearer ${await server.createUser("evan")}` } })
    expect(stranger.status).toBe(404)
    const response = await fetch(`${server.url}/api/wes/app/events?branches=main,streamed`, { headers: { authorization: `Bearer ${key}` } })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toContain("text/event-stream")
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
    let seen = ""
    const events = () => [...seen.matchAll(/^event: branch\ndata: (.*)$/gm)].map((m) => JSON.parse(m[1]!))
    const next = async (count: number) => {
      while (events().length < count) {
        const { value, done } = await reader.read()
        if (done) throw new Error("the stream ended")
        seen += value
      }
    }
    // Connected before the first event: the first read is the stream's opening comment.
    const opening = await reader.read()
    seen += opening.value ?? ""
    expect(seen).toContain(": connected")
    await push("not-listed")
    const commit = await push("streamed")
    await next(1)
    expect(events()[0]).toMatchObject({ kind: "branch.created", branch: "streamed", commit, actor: "wes" })
    const merged = await as().post("/wes/app/branches/streamed/merge")
    expect(merged.status).toBe(200)
    await next(2)
    expect(events()[1]).toMatchObject({ kind: "merge", branch: "streamed", commit: merged.body.commit_hash })
    // The branch not asked for never came.
    expect(events().some((e) => e.branch === "not-listed")).toBe(false)
    await reader.cancel()
  }, 60_000)
})
