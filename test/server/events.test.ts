/**
 * The repository event stream (`GET /api/{owner}/{name}/events`) re-checks access (issue 20, item 3):
 * a stream whose caller may no longer read the repository (made private, removed from the
 * organization, key revoked or expired, the repository moved or deleted) gets `event: closed` with the reason and ends, before any
 * event that followed the change; a caller who still may keeps streaming. Open streams are capped
 * per caller and per node (429 `too_many_streams` with Retry-After), and a disconnect gives its slot back.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { closeAll, expectClosed, openStream } from "../support/EventStream.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

let server: GroveServer
/** A second server with small caps and a 1 s periodic re-check. */
let capped: GroveServer
const tokens: Record<string, string> = {}
const as = (user: string, on: GroveServer = server) => api(on.url, tokens[`${on === server ? "" : "capped:"}${user}`])

beforeAll(async () => {
  // One after the other: two servers starting at once on a loaded machine can pass the start timeout.
  server = await startServer()
  capped = await startServer({
    env: { GROVE_EVENT_STREAMS_PER_CALLER: "3", GROVE_EVENT_STREAMS_PER_NODE: "5", GROVE_EVENT_STREAM_RECHECK_MS: "1000" }
  })
  await Promise.all([
    ...["alice", "bob", "olga"].map(async (user) => (tokens[user] = await server.createUser(user))),
    ...["carol", "dave"].map(async (user) => (tokens[`capped:${user}`] = await capped.createUser(user)))
  ])
}, 300_000)

afterAll(async () => {
  await closeAll()
  await Promise.all([server?.stop(), capped?.stop()])
})

/** A commit on a new branch of `owner/name`, pushed by `user`. */
const pushBranch = async (user: string, fullName: string, branch: string) => {
  const c = buildCommit({ branch, files: { [`${branch}.txt`]: `${branch}\n` } })
  const reply = await as(user).post(`/${fullName}/push`, pushBody({ branch, commits: [c], description: branch }))
  expect(reply.body.success, JSON.stringify(reply.body)).toBe(true)
}

describe("an open event stream re-checks access", () => {
  it("closes an anonymous stream when the repository is made private, before the push that follows", async () => {
    expect((await as("alice").post("/repos", { name: "pub", is_public: true })).status).toBe(201)
    const anonymous = await openStream(server.url, "/alice/pub/events")
    expect(anonymous.status).toBe(200)
    await anonymous.until(": connected")
    const owner = await openStream(server.url, "/alice/pub/events", tokens.alice)
    await owner.until(": connected")
    expect((await as("alice").patch("/alice/pub/visibility", { is_public: false })).status).toBe(200)
    await pushBranch("alice", "alice/pub", "after-private")
    await expectClosed(anonymous, "access_revoked")
    // The owner still may: the owner's stream stays open and gets the push.
    await owner.until("\"branch\":\"after-private\"")
    expect(owner.text()).not.toContain("event: closed")
    // A new anonymous stream is refused like any other read of a private repository.
    expect((await openStream(server.url, "/alice/pub/events")).status).toBe(404)
  }, 60_000)

  it("closes bob's stream when bob is removed from the organization", async () => {
    expect((await as("olga").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
    expect((await as("olga").post("/repos", { name: "app", organization_slug: "acme" })).status).toBe(201)
    expect((await as("olga").post("/orgs/acme/members", { username: "bob", role: "member" })).status).toBe(201)
    const bob = await openStream(server.url, "/acme/app/events", tokens.bob)
    expect(bob.status).toBe(200)
    await bob.until(": connected")
    expect((await as("olga").delete("/orgs/acme/members/bob")).status).toBe(204)
    await pushBranch("olga", "acme/app", "after-removal")
    await expectClosed(bob, "access_revoked")
    expect((await as("bob").get("/acme/app")).status).toBe(404)
  }, 60_000)

  it("closes a stream when its key is revoked (whoami 401), on a public repository it could read anonymously too", async () => {
    expect((await as("alice").post("/repos", { name: "open", is_public: true })).status).toBe(201)
    const created = await as("alice").post("/api-keys", { name: "watcher", scope: "read" })
    expect(created.status).toBe(201)
    const stream = await openStream(server.url, "/alice/open/events", created.body.key)
    expect(stream.status).toBe(200)
    await stream.until(": connected")
    expect((await as("alice").delete(`/api-keys/${created.body.id}`)).status).toBe(204)
    expect((await api(server.url, created.body.key).get("/whoami")).status).toBe(401)
    await pushBranch("alice", "alice/open", "after-revoke")
    await expectClosed(stream, "key_revoked")
  }, 60_000)
})

describe("an open event stream ends with its repository", () => {
  it("closes even the owner's streams when the repository is moved to another organization or deleted", async () => {
    expect((await as("olga").post("/repos", { name: "moving", organization_slug: "acme" })).status).toBe(201)
    expect((await as("olga").post("/repos", { name: "doomed", organization_slug: "acme" })).status).toBe(201)
    const moving = await openStream(server.url, "/acme/moving/events", tokens.olga)
    const doomed = await openStream(server.url, "/acme/doomed/events", tokens.olga)
    expect([moving.status, doomed.status]).toEqual([200, 200])
    await moving.until(": connected")
    await doomed.until(": connected")
    expect((await as("olga").post("/acme/moving/transfer", { to_organization: "olga" })).status).toBe(200)
    await expectClosed(moving, "access_revoked")
    expect((await as("olga").delete("/acme/doomed")).status).toBe(204)
    await expectClosed(doomed, "access_revoked")
  }, 60_000)
})

describe("the periodic re-check and the caps (a server with 3 per caller, 5 per node, a 1 s re-check)", () => {
  it("closes a stream whose key expired, with no access event, at the next periodic re-check", async () => {
    expect((await as("carol", capped).post("/repos", { name: "timed", is_public: true })).status).toBe(201)
    const expiresAt = Date.now() + 2_000
    const created = await as("carol", capped).post("/api-keys", { name: "short", expires_at: new Date(expiresAt).toISOString() })
    expect(created.status).toBe(201)
    const stream = await openStream(capped.url, "/carol/timed/events", created.body.key)
    expect(stream.status).toBe(200)
    await stream.until(": connected")
    await expectClosed(stream, "key_revoked")
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt)
  }, 60_000)

  it("answers 429 too_many_streams past the caller's and the node's cap, and gives slots back on disconnect", async () => {
    expect((await as("carol", capped).post("/repos", { name: "busy", is_public: true })).status).toBe(201)
    const path = "/carol/busy/events"
    const anonymous = [await openStream(capped.url, path), await openStream(capped.url, path), await openStream(capped.url, path)]
    for (const stream of anonymous) expect(stream.status).toBe(200)
    const refused = await openStream(capped.url, path)
    expect(refused.status).toBe(429)
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/)
    expect(JSON.parse(refused.text())).toMatchObject({ code: "too_many_streams" })
    // Another caller has slots of its own, up to the node's 5.
    const dave = [await openStream(capped.url, path, tokens["capped:dave"]), await openStream(capped.url, path, tokens["capped:dave"])]
    for (const stream of dave) expect(stream.status).toBe(200)
    const full = await openStream(capped.url, path, tokens["capped:carol"])
    expect(full.status).toBe(429)
    expect(JSON.parse(full.text())).toMatchObject({ code: "too_many_streams" })
    // Disconnecting gives the slots back: anonymous may open again, and so may carol.
    await anonymous[0]!.close()
    await anonymous[1]!.close()
    const again = await waitFor("an anonymous slot given back", async () => {
      const stream = await openStream(capped.url, path)
      return stream.status === 200 ? stream : undefined
    })
    await again.until(": connected")
    const carol = await waitFor("a slot on the node given back", async () => {
      const stream = await openStream(capped.url, path, tokens["capped:carol"])
      return stream.status === 200 ? stream : undefined
    })
    await carol.until(": connected")
    for (const stream of [...anonymous, ...dave, again, carol]) await stream.close()
    // Requests whose stream never runs give their slots back too: HEAD, more of them than the node's cap.
    for (let i = 0; i < 6; i++) {
      const head = await fetch(`${capped.url}/api${path}`, { method: "HEAD" })
      expect(head.status).toBeLessThan(500)
    }
    // All given back: the caps allow a full set again.
    await waitFor("every slot given back", async () => {
      const streams = [await openStream(capped.url, path), await openStream(capped.url, path), await openStream(capped.url, path)]
      const ok = streams.every((s) => s.status === 200)
      for (const s of streams) await s.close()
      return ok ? true : undefined
    })
  }, 60_000)
})
