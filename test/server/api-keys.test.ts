/**
 * Personal API keys beyond the spec, end to end (the real grove-server binary, embedded mode):
 * an optional `expires_at` (in the future, else 400; an expired key answers 401 token_expired on
 * API routes and on raw routes alike), and listings that show the last use, which is recorded at
 * most once a minute per key rather than on every request.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
let alice: string

beforeAll(async () => {
  server = await startServer()
  alice = await server.createUser("alice", { admin: false })
  expect((await api(server.url, alice).post("/repos", { name: "pub", is_public: true })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const rawFile = (token: string) =>
  fetch(`${server.url}/api/alice/pub/raw/main/README.md`, { headers: { authorization: `Bearer ${token}` } })

const listed = async (id: string) => {
  const list = await api(server.url, alice).get("/api-keys")
  expect(list.status).toBe(200)
  return list.body.api_keys.find((k: { id: string }) => k.id === id)
}

describe("personal keys with expires_at", () => {
  it("accepts an expires_at in the future; refuses one in the past or not an ISO 8601 timestamp with 400", async () => {
    const a = api(server.url, alice)
    const future = new Date(Date.now() + 3_600_000).toISOString()
    const ok = await a.post("/api-keys", { name: "soon", expires_at: future })
    expect(ok.status).toBe(201)
    expect(ok.body.expires_at).toBe(future)
    for (
      const expires_at of [
        new Date(Date.now() - 60_000).toISOString(),
        "2001-01-01T00:00:00Z",
        "tomorrow",
        "2099-02-30T00:00:00Z",
        "2099-01-01T24:00:00Z",
        "2099-01-01",
        "2099-01-01T00:00:00",
        12345,
        ""
      ]
    ) {
      const r = await a.post("/api-keys", { name: "bad", expires_at })
      expect(r.status, JSON.stringify(expires_at)).toBe(400)
      expect(r.body.code).toMatch(/^invalid_/)
    }
    // None of them made a key.
    const list = await a.get("/api-keys")
    expect(list.body.api_keys.filter((k: { name: string }) => k.name === "bad")).toEqual([])
  })

  it("lists expires_at; a key without one never expires", async () => {
    const a = api(server.url, alice)
    const expires = "2099-06-30T12:00:00+02:00"
    const created = await a.post("/api-keys", { name: "later", expires_at: expires })
    expect(created.status).toBe(201)
    expect(created.body.expires_at).toBe("2099-06-30T10:00:00.000Z")
    expect(await listed(created.body.id)).toMatchObject({ name: "later", expires_at: "2099-06-30T10:00:00.000Z" })
    const forever = await a.post("/api-keys", { name: "forever" })
    expect(forever.status).toBe(201)
    expect(forever.body).not.toHaveProperty("expires_at")
    expect(await listed(forever.body.id)).not.toHaveProperty("expires_at")
  })

  it("answers 401 token_expired once the key has expired, on an API route and on a raw route", async () => {
    const a = api(server.url, alice)
    const expiresAt = Date.now() + 2_500
    const created = await a.post("/api-keys", { name: "short", expires_at: new Date(expiresAt).toISOString() })
    expect(created.status).toBe(201)
    const key: string = created.body.key
    expect((await api(server.url, key).get("/whoami")).status).toBe(200)
    // A raw route authenticates the key before it looks for the file (404 here: the repository is empty).
    expect((await rawFile(key)).status).not.toBe(401)
    await sleep(expiresAt - Date.now() + 300)
    const whoami = await api(server.url, key).get("/whoami")
    expect(whoami.status).toBe(401)
    expect(whoami.body).toMatchObject({ code: "token_expired" })
    const listing = await api(server.url, key).get("/api-keys")
    expect(listing.status).toBe(401)
    expect(listing.body.code).toBe("token_expired")
    const raw = await rawFile(key)
    expect(raw.status).toBe(401)
    expect(await raw.json()).toMatchObject({ code: "token_expired" })
    // An unknown token still says only that it is invalid.
    expect((await api(server.url, "grove_notarealtokennotarealtoken00").get("/whoami")).body.code).toBe("invalid_token")
    // The owner still sees the expired key, with its expiry, and can revoke it.
    expect(await listed(created.body.id)).toMatchObject({ name: "short", expires_at: new Date(expiresAt).toISOString() })
    expect((await a.delete(`/api-keys/${created.body.id}`)).status).toBe(204)
  }, 30_000)
})

describe("last use of a personal key", () => {
  it("appears in the listing after use and is not rewritten on every request", async () => {
    const a = api(server.url, alice)
    const created = await a.post("/api-keys", { name: "used", expires_at: "2099-01-01T00:00:00Z" })
    expect(created.status).toBe(201)
    expect(created.body).not.toHaveProperty("last_used_at")
    expect(await listed(created.body.id)).not.toHaveProperty("last_used_at")
    const before = Date.now()
    expect((await api(server.url, created.body.key).get("/whoami")).status).toBe(200)
    // Recorded in the background: the request does not wait for it.
    let first: { last_used_at?: string; expires_at?: string } | undefined
    for (let i = 0; i < 50 && first?.last_used_at === undefined; i++) {
      first = await listed(created.body.id)
      if (first?.last_used_at === undefined) await sleep(100)
    }
    expect(first).toMatchObject({ expires_at: "2099-01-01T00:00:00.000Z" })
    expect(first?.last_used_at).toBeDefined()
    expect(Date.parse(first!.last_used_at!)).toBeGreaterThanOrEqual(before - 5_000)
    // More requests within the minute leave the recorded time alone.
    await sleep(1_100)
    for (let i = 0; i < 3; i++) expect((await api(server.url, created.body.key).get("/whoami")).status).toBe(200)
    await sleep(500)
    expect((await listed(created.body.id))?.last_used_at).toBe(first!.last_used_at)
  }, 30_000)
})
