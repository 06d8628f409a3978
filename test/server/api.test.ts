/**
 * The JSON API end to end: the real grove-server binary (embedded mode),
 * users made with the real admin command, requests over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let alice: string
let bob: string

beforeAll(async () => {
  server = await startServer()
  alice = await server.createUser("alice", { admin: false })
  bob = await server.createUser("bob")
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

describe("system", () => {
  it("answers version, openapi and JSON errors for unknown routes", async () => {
    const anon = api(server.url)
    const version = await anon.get("/version")
    expect(version.status).toBe(200)
    expect(version.body).toMatchObject({ version: "0.1.0", mode: "embedded" })
    const openapi = await anon.get("/openapi.json")
    expect(openapi.status).toBe(200)
    expect(openapi.body.openapi).toMatch(/^3\./)
    expect(Object.keys(openapi.body.paths)).toContain("/api/repos")
    const missing = await anon.get("/no/such/route/here")
    expect(missing.status).toBe(404)
    expect(missing.body).toEqual({ error: "not found", code: "not_found" })
    const wrongMethod = await anon.raw("PUT", "/version")
    expect(wrongMethod.status).toBeGreaterThanOrEqual(400)
    expect(isErrorBody(wrongMethod.body)).toBe(true)
  })

  it("resolves tokens for whoami and rejects bad ones with 401", async () => {
    const me = await api(server.url, alice).get("/whoami")
    expect(me.status).toBe(200)
    expect(me.body).toMatchObject({ kind: "user", name: "alice", is_admin: false, token: { kind: "personal" } })
    expect((await api(server.url).get("/whoami")).status).toBe(401)
    const bad = await api(server.url, "grove_notarealtokennotarealtoken00").get("/whoami")
    expect(bad.status).toBe(401)
    expect(bad.body.code).toBe("invalid_token")
    const malformed = await api(server.url).get("/whoami", { authorization: "Basic abc" })
    expect(malformed.status).toBe(401)
    expect(isErrorBody(malformed.body)).toBe(true)
  })
})

describe("personal API keys", () => {
  it("shows the full key once, lists prefixes only, and revokes", async () => {
    const a = api(server.url, alice)
    const created = await a.post("/api-keys", { name: "laptop" })
    expect(created.status).toBe(201)
    expect(created.body.key).toMatch(/^grove_[0-9A-Za-z]{43}$/)
    expect(created.body).toMatchObject({ name: "laptop", scope: "full" })
    expect(created.body.key.startsWith(created.body.prefix)).toBe(true)
    const list = await a.get("/api-keys")
    expect(list.status).toBe(200)
    const listed = list.body.api_keys.find((k: { id: string }) => k.id === created.body.id)
    expect(listed).toMatchObject({ name: "laptop", prefix: created.body.prefix })
    expect(JSON.stringify(list.body)).not.toContain(created.body.key)
    // The new key works, then stops working once revoked.
    expect((await api(server.url, created.body.key).get("/whoami")).status).toBe(200)
    expect((await a.delete(`/api-keys/${created.body.id}`)).status).toBe(204)
    expect((await api(server.url, created.body.key).get("/whoami")).status).toBe(401)
    expect((await a.delete(`/api-keys/${created.body.id}`)).status).toBe(404)
    expect((await a.delete("/api-keys/not-a-key")).status).toBe(404)
    // Another user's key id is not found for alice.
    const bobs = await api(server.url, bob).post("/api-keys", { name: "b" })
    expect((await a.delete(`/api-keys/${bobs.body.id}`)).status).toBe(404)
  })

  it("validates names and scopes", async () => {
    const a = api(server.url, alice)
    for (const name of ["", " ", "x".repeat(101), "a\u0000b", "line\nbreak"]) {
      const r = await a.post("/api-keys", { name })
      expect(r.status, JSON.stringify(name)).toBe(400)
      expect(isErrorBody(r.body)).toBe(true)
    }
    expect((await a.post("/api-keys", { name: "é".repeat(100) })).status).toBe(201)
    expect((await a.post("/api-keys", { name: "x", scope: "admin" })).status).toBe(400)
    expect((await a.post("/api-keys", { name: "x", repo: "not-a-repo-path" })).status).toBe(400)
    expect((await a.post("/api-keys", { name: "x", repo: "alice/missing" })).status).toBe(404)
  })

  it("a read key cannot write (403 naming the scope); a repo key sees only its repository", async () => {
    const a = api(server.url, alice)
    expect((await a.post("/repos", { name: "scoped-one" })).status).toBe(201)
    expect((await a.post("/repos", { name: "scoped-two" })).status).toBe(201)
    const readKey = (await a.post("/api-keys", { name: "ro", scope: "read" })).body.key
    const ro = api(server.url, readKey)
    expect((await ro.get("/alice/scoped-one")).status).toBe(200)
    const denied = await ro.post("/repos", { name: "nope" })
    expect(denied.status).toBe(403)
    expect(denied.body).toMatchObject({ code: "missing_scope", scope: "write" })
    expect(denied.body.error).toContain("write")
    expect((await ro.post("/api-keys", { name: "escalate" })).status).toBe(403)

    const repoKey = (await a.post("/api-keys", { name: "one", repo: "alice/scoped-one" })).body.key
    const scoped = api(server.url, repoKey)
    expect((await scoped.get("/alice/scoped-one")).status).toBe(200)
    const other = await scoped.get("/alice/scoped-two")
    expect(other.status).toBe(404)
    expect(other.body.code).toBe("not_found")
    const listed = await scoped.get("/repos")
    expect(listed.body.repos.map((r: { full_name: string }) => r.full_name)).toEqual(["alice/scoped-one"])
    expect((await scoped.get("/whoami")).body.token.repo).toBe("alice/scoped-one")
    expect((await scoped.post("/api-keys", { name: "x" })).status).toBe(403)
  })
})

describe("organizations", () => {
  it("creates, lists and hides organizations", async () => {
    const a = api(server.url, alice)
    const created = await a.post("/orgs", { slug: "acme", name: "Acme Inc.", description: "tools" })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ slug: "acme", name: "Acme Inc.", personal: false, role: "owner" })
    expect((await a.post("/orgs", { slug: "acme", name: "again" })).status).toBe(409)
    // A user name and an organization slug share one namespace.
    expect((await a.post("/orgs", { slug: "bob", name: "squat" })).status).toBe(409)
    for (const slug of ["", "Acme", "a b", "../x", "orgs", "repos", "x".repeat(40), "-a"]) {
      expect((await a.post("/orgs", { slug, name: "n" })).status, slug).toBe(400)
    }
    const list = await a.get("/orgs")
    expect(list.body.organizations.map((o: { slug: string }) => o.slug)).toEqual(["acme", "alice"])
    expect((await a.get("/orgs/acme")).status).toBe(200)
    const hidden = await api(server.url, bob).get("/orgs/acme")
    const missing = await api(server.url, bob).get("/orgs/no-such-org")
    expect(hidden.status).toBe(404)
    expect(missing.status).toBe(404)
    expect(hidden.body.code).toBe(missing.body.code)
    expect((await api(server.url).get("/orgs/acme")).status).toBe(404)
  })
})

describe("repositories", () => {
  it("creates, reads, lists, changes visibility and deletes", async () => {
    const a = api(server.url, alice)
    const created = await a.post("/repos", { name: "Widget", description: "first" })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({
      owner: "alice",
      name: "Widget",
      full_name: "alice/Widget",
      is_public: false,
      visibility: "private",
      head: null,
      default_branch: "main"
    })
    // Names are unique per owner regardless of case.
    const dup = await a.post("/repos", { name: "widget" })
    expect(dup.status).toBe(409)
    expect(dup.body.code).toBe("name_taken")
    expect((await a.get("/alice/widget")).body.name).toBe("Widget")

    const b = api(server.url, bob)
    const anon = api(server.url)
    const hidden = await b.get("/alice/Widget")
    expect(hidden.status).toBe(404)
    const absent = await b.get("/alice/does-not-exist")
    expect({ status: hidden.status, code: hidden.body.code }).toEqual({ status: absent.status, code: absent.body.code })
    expect((await anon.get("/alice/Widget")).status).toBe(404)
    expect((await b.delete("/alice/Widget")).status).toBe(404)

    const pub = await a.patch("/alice/Widget/visibility", { is_public: true })
    expect(pub.status).toBe(200)
    expect(pub.body).toMatchObject({ is_public: true, visibility: "public" })
    expect((await anon.get("/alice/Widget")).status).toBe(200)
    expect((await b.get("/alice/Widget")).status).toBe(200)
    // Seeing is not changing: anonymous 401, a non-member 403.
    expect((await anon.delete("/alice/Widget")).status).toBe(401)
    const forbidden = await b.patch("/alice/Widget/visibility", { is_public: false })
    expect(forbidden.status).toBe(403)

    const size = await a.get("/alice/Widget/size")
    expect(size.body).toEqual({ full_name: "alice/Widget", size_bytes: 0, objects: 0 })

    expect((await a.delete("/alice/Widget")).status).toBe(204)
    expect((await a.get("/alice/Widget")).status).toBe(404)
    expect((await a.delete("/alice/Widget")).status).toBe(404)
    expect((await a.post("/repos", { name: "Widget" })).status).toBe(201)
  })

  it("rejects bad names and bodies with clear 400s", async () => {
    const a = api(server.url, alice)
    const bad = ["", ".", "..", "a/b", "a\\b", "a b", "tab\there", "ctl\u0001", "x.git", ".hidden", "a..b", "x".repeat(101)]
    for (const name of bad) {
      const r = await a.post("/repos", { name })
      expect(r.status, JSON.stringify(name)).toBe(400)
      expect(isErrorBody(r.body)).toBe(true)
      expect(r.body.error.length).toBeGreaterThan(5)
    }
    expect((await a.post("/repos", "{not json")).status).toBe(400)
    expect((await a.post("/repos", { name: 42 })).status).toBe(400)
    expect((await a.post("/repos", { description: "no name" })).status).toBe(400)
    expect((await a.post("/repos", { name: "ok-name", description: "bad\u0000" })).status).toBe(400)
    expect((await a.get("/repos?sort=sideways")).status).toBe(400)
    expect((await a.post("/repos", { name: "x", organization_slug: "no-such-org" })).status).toBe(404)
    expect((await api(server.url, bob).post("/repos", { name: "x", organization_slug: "acme" })).status).toBe(404)
  })

  it("lists what the caller can read, sorted as asked", async () => {
    const a = api(server.url, alice)
    for (const name of ["sort-b", "sort-a", "sort-c"]) expect((await a.post("/repos", { name })).status).toBe(201)
    const byName = (await a.get("/repos?sort=name")).body.repos.map((r: { full_name: string }) => r.full_name)
    expect(byName).toEqual([...byName].sort((x: string, y: string) => x.toLowerCase().localeCompare(y.toLowerCase())))
    const byCreated = (await a.get("/repos?sort=created")).body.repos.map((r: { name: string }) => r.name)
    expect(byCreated.indexOf("sort-c")).toBeLessThan(byCreated.indexOf("sort-a"))
    expect(byCreated.indexOf("sort-a")).toBeLessThan(byCreated.indexOf("sort-b"))
    const bobSees = (await api(server.url, bob).get("/repos")).body.repos.map((r: { full_name: string }) => r.full_name)
    expect(bobSees).not.toContain("alice/sort-a")
    const anonSees = (await api(server.url).get("/repos")).body.repos
    expect(anonSees.every((r: { is_public: boolean }) => r.is_public)).toBe(true)
  })

  it("creates in an organization and transfers between organizations", async () => {
    const a = api(server.url, alice)
    expect((await a.post("/orgs", { slug: "tools", name: "Tools" })).status).toBe(201)
    const inOrg = await a.post("/repos", { name: "hammer", organization_slug: "tools", is_public: true })
    expect(inOrg.status).toBe(201)
    expect(inOrg.body.full_name).toBe("tools/hammer")
    const moved = await a.post("/alice/scoped-two/transfer", { to_organization: "tools" })
    expect(moved.status).toBe(200)
    expect(moved.body.full_name).toBe("tools/scoped-two")
    expect((await a.get("/alice/scoped-two")).status).toBe(404)
    expect((await a.get("/tools/scoped-two")).status).toBe(200)
    // Bob may not move his repository into an organization he is not in: it does not exist for him.
    expect((await api(server.url, bob).post("/repos", { name: "mine" })).status).toBe(201)
    expect((await api(server.url, bob).post("/bob/mine/transfer", { to_organization: "tools" })).status).toBe(404)
    // A name clash in the target answers 409 and moves nothing.
    expect((await a.post("/repos", { name: "hammer" })).status).toBe(201)
    const clash = await a.post("/alice/hammer/transfer", { to_organization: "tools" })
    expect(clash.status).toBe(409)
    expect((await a.get("/alice/hammer")).status).toBe(200)
  })

  it("replays a write retried with the same Idempotency-Key", async () => {
    const a = api(server.url, alice)
    const first = await a.post("/repos", { name: "idem" }, { "idempotency-key": "create-idem-1" })
    expect(first.status).toBe(201)
    const again = await a.post("/repos", { name: "idem" }, { "idempotency-key": "create-idem-1" })
    expect(again.status).toBe(201)
    expect(again.body.id).toBe(first.body.id)
    const fresh = await a.post("/repos", { name: "idem" }, { "idempotency-key": "create-idem-2" })
    expect(fresh.status).toBe(409)
    expect((await a.post("/repos", { name: "idem2" }, { "idempotency-key": "bad key with spaces" })).status).toBe(400)
  })
})
