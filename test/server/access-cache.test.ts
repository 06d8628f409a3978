/**
 * The embedded server caches what each request re-reads (the repository record, the key's row, the
 * caller's role) and never serves it stale: each change is seen by the very next request, with no
 * waiting. Every read is made twice before the change, so the first change-free answer is cached.
 * The head a merge moves is the case the old fresh read per GET was for (12fe0d1): the merge
 * handlers invalidate nothing themselves, so only the database's notification can make it right.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
let pam: string
let sid: string

beforeAll(async () => {
  server = await startServer()
  pam = await server.createUser("pam")
  sid = await server.createUser("sid")
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const as = (token: string | undefined) => api(server.url, token)
/** Reads `path` twice (the second answer comes from the cache) and answers the status. */
const readTwice = async (token: string | undefined, path: string) => {
  const first = await as(token).get(path)
  const second = await as(token).get(path)
  expect(second.status).toBe(first.status)
  return second
}

describe("access caches, embedded: the next request sees the change", () => {
  it("a head moved by a merge, and updated_at", async () => {
    expect((await as(pam).post("/repos", { name: "app", is_public: true })).status).toBe(201)
    const before = await readTwice(sid, "/pam/app")
    expect(before.body.head).toBeNull()
    const commit = buildCommit({ branch: "first", files: { "x.txt": "one\n" } })
    const pushed = await as(pam).post("/pam/app/push", pushBody({ branch: "first", commits: [commit] }))
    expect(pushed.body, JSON.stringify(pushed.body)).toMatchObject({ success: true })
    await readTwice(sid, "/pam/app")
    const merged = await as(pam).post("/pam/app/branches/first/merge")
    expect(merged.status, JSON.stringify(merged.body)).toBe(200)
    const after = await as(sid).get("/pam/app")
    expect(after.body.head).toBe(merged.body.commit_hash)
    expect(Date.parse(after.body.updated_at)).toBeGreaterThan(Date.parse(before.body.updated_at))
  }, 120_000)

  it("a repository made private: 404 to others and to anonymous callers", async () => {
    expect((await as(pam).post("/repos", { name: "open", is_public: true })).status).toBe(201)
    expect((await readTwice(sid, "/pam/open")).status).toBe(200)
    expect((await readTwice(undefined, "/pam/open")).status).toBe(200)
    expect((await as(pam).patch("/pam/open/visibility", { is_public: false })).status).toBe(200)
    expect((await as(sid).get("/pam/open")).status).toBe(404)
    expect((await as(undefined).get("/pam/open")).status).toBe(404)
    expect((await as(pam).get("/pam/open")).body.visibility).toBe("private")
  }, 120_000)

  it("a revoked key: 401", async () => {
    const created = await as(pam).post("/api-keys", { name: "short-lived" })
    expect(created.status).toBe(201)
    const key: string = created.body.key
    expect((await readTwice(key, "/pam/app")).status).toBe(200)
    expect((await as(pam).delete(`/api-keys/${created.body.id}`)).status).toBe(204)
    expect((await as(key).get("/pam/app")).status).toBe(401)
  }, 120_000)

  it("a member removed from the organization: its private repository answers 404", async () => {
    expect((await as(pam).post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
    expect((await as(pam).post("/orgs/acme/members", { username: "sid" })).status).toBe(201)
    expect((await as(pam).post("/repos", { name: "secret", organization_slug: "acme" })).status).toBe(201)
    expect((await readTwice(sid, "/acme/secret")).status).toBe(200)
    expect((await as(pam).delete("/orgs/acme/members/sid")).status).toBe(204)
    expect((await as(sid).get("/acme/secret")).status).toBe(404)
  }, 120_000)
})
