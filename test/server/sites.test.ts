/**
 * Organization sites end to end against the real server: the settings (`GET/PUT/DELETE
 * /api/orgs/{slug}/site`, `GET /api/sites`) with their access rules and audit rows.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
const tokens: Record<string, string> = {}
const as = (user?: string) => api(server.url, user === undefined ? undefined : tokens[user])

beforeAll(async () => {
  server = await startServer()
  for (const user of ["olga", "adam", "mia", "zed"]) tokens[user] = await server.createUser(user)
  expect((await as("olga").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/members", { username: "adam", role: "admin" })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/members", { username: "mia" })).status).toBe(201)
  expect((await as("olga").post("/repos", { name: "www", organization_slug: "acme", is_public: true })).status).toBe(201)
  expect((await as("olga").post("/repos", { name: "vault", organization_slug: "acme", is_public: false })).status).toBe(201)
  expect((await as("zed").post("/orgs", { slug: "zorg", name: "Zorg" })).status).toBe(201)
  expect((await as("zed").post("/repos", { name: "hidden", organization_slug: "zorg", is_public: false })).status).toBe(201)
  const c = buildCommit({ branch: "setup", files: { "docs/index.html": "<h1>hi</h1>\n" } })
  const pushed = await as("olga").post("/acme/www/push", pushBody({ branch: "setup", commits: [c], description: "Setup" }))
  expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
  expect((await as("olga").post("/acme/www/branches/setup/merge")).status).toBe(200)
}, 120_000)

afterAll(async () => {
  await server?.stop()
})

describe("site settings", () => {
  it("refuses bad settings: no repo, an unknown repo, another org's repo, a source_dir that climbs out", async () => {
    const cases: Array<[unknown, number]> = [
      [{}, 400],
      [{ source_dir: "docs" }, 400],
      [{ repo: "nope" }, 404],
      [{ repo: "zorg/hidden" }, 400],
      [{ repo: "www", source_dir: "../x" }, 400],
      [{ repo: "www", source_dir: "docs/../../etc" }, 400],
      [{ repo: "www", branch: "dev" }, 400],
      [{ repo: "www", extra: 1 }, 400],
      ["not json", 400]
    ]
    for (const [body, status] of cases) {
      const reply = await as("olga").put("/orgs/acme/site", body)
      expect(reply.status, JSON.stringify([body, reply.body])).toBe(status)
      expect(isErrorBody(reply.body), JSON.stringify(reply.body)).toBe(true)
    }
    expect((await as().get("/orgs/acme/site")).status).toBe(404)
  })

  it("a plain member gets 403, a non-member and an anonymous caller never learn of the organization", async () => {
    expect((await as("mia").put("/orgs/acme/site", { repo: "www" })).status).toBe(403)
    expect((await as("mia").delete("/orgs/acme/site")).status).toBe(403)
    expect((await as("zed").put("/orgs/acme/site", { repo: "www" })).status).toBe(404)
    expect([401, 404]).toContain((await as().put("/orgs/acme/site", { repo: "www" })).status)
  })

  it("an admin publishes a public repository; its settings are public, listed and audited", async () => {
    const put = await as("adam").put("/orgs/acme/site", { repo: "acme/www", source_dir: "/docs/" })
    expect(put.status, JSON.stringify(put.body)).toBe(200)
    expect(put.body).toMatchObject({ organization_slug: "acme", repo_name: "www", branch: "main", source_dir: "/docs", url: `${server.url}/sites/acme/` })
    expect(Date.parse(put.body.created_at)).not.toBeNaN()
    const anonymous = await as().get("/orgs/acme/site")
    expect(anonymous.status).toBe(200)
    expect(anonymous.body).toEqual(put.body)
    expect((await as("zed").get("/sites")).body.sites.map((s: { organization_slug: string }) => s.organization_slug)).toEqual(["acme"])
    const again = await as("olga").put("/orgs/acme/site", { repo: "www" })
    expect(again.body.source_dir).toBe("/")
    expect(again.body.created_at).toBe(put.body.created_at)
    const entries = (await as("olga").get("/orgs/acme/audit")).body.entries as Array<{ action: string; actor: string }>
    expect(entries.filter((e) => e.action === "site.set").map((e) => e.actor)).toEqual(["olga", "adam"])
  })

  it("a site of a private repository is hidden from all but the organization's members", async () => {
    expect((await as("zed").put("/orgs/zorg/site", { repo: "hidden" })).status).toBe(200)
    expect((await as().get("/orgs/zorg/site")).status).toBe(404)
    expect((await as("olga").get("/orgs/zorg/site")).status).toBe(404)
    expect((await as("zed").get("/orgs/zorg/site")).status).toBe(200)
    expect((await as("olga").get("/sites")).body.sites.map((s: { organization_slug: string }) => s.organization_slug)).toEqual(["acme"])
    expect((await as("zed").get("/sites")).body.sites.map((s: { organization_slug: string }) => s.organization_slug)).toEqual(["acme", "zorg"])
    expect((await as().get("/sites")).body.sites.length).toBe(1)
  })

  it("DELETE disables the site (204, audited); a second DELETE is 404", async () => {
    expect((await as("zed").delete("/orgs/zorg/site")).status).toBe(204)
    expect((await as("zed").get("/orgs/zorg/site")).status).toBe(404)
    expect((await as("zed").delete("/orgs/zorg/site")).status).toBe(404)
    const entries = (await as("zed").get("/orgs/zorg/audit")).body.entries as Array<{ action: string }>
    expect(entries.map((e) => e.action)).toContain("site.delete")
  })
})
