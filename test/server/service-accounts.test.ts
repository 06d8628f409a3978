/**
 * Service accounts and their keys against the real server: the endpoints, scopes (403 naming the
 * missing one; `release` never implied), a key capped by its creator, disabling, enabling, deleting
 * and revoking (401 at once), whoami, the audit log under the account's own name, and that a
 * key's secret is shown once and never again (listings, audit, operations).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
const tokens: Record<string, string> = {}
const as = (user: string) => api(server.url, tokens[user])

beforeAll(async () => {
  server = await startServer()
  for (const user of ["olga", "adam", "mia", "nina"]) tokens[user] = await server.createUser(user)
  expect((await as("olga").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/members", { username: "adam", role: "admin" })).status).toBe(201)
  expect((await as("olga").post("/orgs/acme/members", { username: "mia" })).status).toBe(201)
  expect((await as("olga").post("/repos", { name: "app", organization_slug: "acme" })).status).toBe(201)
  expect((await as("nina").post("/repos", { name: "elsewhere" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const newKey = async (by: string, account: string, scopes: string) => {
  const created = await as(by).post(`/orgs/acme/service-accounts/${account}/keys`, { name: `${scopes} key`, scopes })
  expect(created.status, JSON.stringify(created.body)).toBe(201)
  return created.body as { key_id: string; key: string; prefix: string; scopes: string }
}

describe("service accounts", () => {
  it("are created, listed and managed by owners and admins only", async () => {
    const created = await as("adam").post("/orgs/acme/service-accounts", { name: "deploy-bot", display_name: "Deploy bot" })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    expect(created.body).toMatchObject({ name: "deploy-bot", display_name: "Deploy bot", disabled: false, organization: "acme" })
    expect((await as("adam").post("/orgs/acme/service-accounts", { name: "deploy-bot" })).status).toBe(409)
    expect((await as("mia").post("/orgs/acme/service-accounts", { name: "mine" })).status).toBe(403)
    expect((await as("nina").post("/orgs/acme/service-accounts", { name: "mine" })).status).toBe(404)
    expect((await as("adam").post("/orgs/acme/service-accounts", { name: "Bad Name" })).status).toBe(400)
    expect((await as("mia").get("/orgs/acme/service-accounts")).body.service_accounts).toMatchObject([{ name: "deploy-bot" }])
    expect((await as("nina").get("/orgs/acme/service-accounts")).status).toBe(404)
    expect((await as("adam").patch("/orgs/acme/service-accounts/deploy-bot", { disabled: "yes" })).status).toBe(400)
    expect((await as("adam").patch("/orgs/acme/service-accounts/deploy-bot", {})).status).toBe(400)
    expect((await as("adam").patch("/orgs/acme/service-accounts/nobody", { disabled: true })).status).toBe(404)
  })

  it("keys: scopes required and known; shown once; listings show prefix, scopes and last use", async () => {
    for (const scopes of ["", "read,fly", "READ", ",", "read,,write"]) {
      const bad = await as("adam").post("/orgs/acme/service-accounts/deploy-bot/keys", { name: "k", scopes })
      expect(bad.status, scopes).toBe(400)
    }
    expect((await as("adam").post("/orgs/acme/service-accounts/deploy-bot/keys", { name: "k" })).status).toBe(400)
    const key = await newKey("adam", "deploy-bot", "write,read")
    expect(key.key.startsWith("grove_")).toBe(true)
    expect(key.scopes).toBe("read,write")
    expect(key.key.startsWith(key.prefix)).toBe(true)
    expect((await api(server.url, key.key).get("/acme/app")).status).toBe(200)
    const listed = await as("adam").get("/orgs/acme/service-accounts/deploy-bot/keys")
    expect(listed.status).toBe(200)
    expect(listed.body.keys).toHaveLength(1)
    expect(listed.body.keys[0]).toMatchObject({ key_id: key.key_id, prefix: key.prefix, scopes: "read,write" })
    expect(listed.body.keys[0].last_used_at).toBeDefined()
    expect(JSON.stringify(listed.body)).not.toContain(key.key)
    expect((await as("mia").get("/orgs/acme/service-accounts/deploy-bot/keys")).status).toBe(403)
  })

  it("whoami names the account and its organization", async () => {
    const key = await newKey("adam", "deploy-bot", "merge")
    const who = await api(server.url, key.key).get("/whoami")
    expect(who.status).toBe(200)
    expect(who.body).toMatchObject({ kind: "service_account", name: "deploy-bot", organization: "acme", token: { kind: "service", scopes: ["merge"] } })
  })

  it("a request outside the key's scopes answers 403 naming the scope; release is never implied", async () => {
    const read = await newKey("adam", "deploy-bot", "read")
    const write = await api(server.url, read.key).post("/acme/app/branches", { name: "x" })
    expect(write.status).toBe(403)
    expect(write.body).toMatchObject({ code: "missing_scope", scope: "write" })
    expect(write.body.error).toContain("write")

    const writer = await newKey("adam", "deploy-bot", "read,write")
    const c = buildCommit({ branch: "bot", files: { "bot.txt": "hi\n" } })
    expect((await api(server.url, writer.key).post("/acme/app/push", pushBody({ branch: "bot", commits: [c], description: "Bot" }))).body.success).toBe(true)
    const merge = await api(server.url, writer.key).post("/acme/app/branches/bot/merge")
    expect(merge.body).toMatchObject({ code: "missing_scope", scope: "merge" })
    const admin = await newKey("adam", "deploy-bot", "read,admin")
    expect((await api(server.url, admin.key).patch("/orgs/acme", { name: "Acme" })).status).toBe(200)
    const merger = await newKey("adam", "deploy-bot", "merge")
    expect((await api(server.url, merger.key).post("/acme/app/branches/bot/merge")).status).toBe(200)

    // An admin may not hand out `release`; an owner may, and `admin` never implies it.
    const release = await as("adam").post("/orgs/acme/service-accounts/deploy-bot/keys", { name: "r", scopes: "release" })
    expect(release.status).toBe(403)
    expect(release.body).toMatchObject({ scope: "release" })
    expect((await as("olga").post("/orgs/acme/service-accounts/deploy-bot/keys", { name: "r", scopes: "release" })).status).toBe(201)
  })

  it("acts only within its organization; never beyond its creator's current role", async () => {
    const key = await newKey("adam", "deploy-bot", "read,write,admin")
    expect((await api(server.url, key.key).get("/nina/elsewhere")).status).toBe(404)
    expect((await api(server.url, key.key).get("/repos")).body.repos.map((r: { full_name: string }) => r.full_name)).toEqual(["acme/app"])
    // adam is demoted to member: his key loses what a member may not do, at once.
    expect((await as("olga").patch("/orgs/acme/members/adam", { role: "member" })).status).toBe(200)
    expect((await api(server.url, key.key).patch("/orgs/acme", { name: "Acme 2" })).status).toBe(403)
    expect((await api(server.url, key.key).get("/acme/app")).status).toBe(200)
    // adam leaves: the key sees nothing private any more.
    expect((await as("olga").delete("/orgs/acme/members/adam")).status).toBe(204)
    expect((await api(server.url, key.key).get("/acme/app")).status).toBe(404)
    expect((await as("olga").post("/orgs/acme/members", { username: "adam", role: "admin" })).status).toBe(201)
    expect((await api(server.url, key.key).get("/acme/app")).status).toBe(200)
  })

  it("disabling stops every key at once, enabling restores them; revoking or deleting ends access", async () => {
    const one = await newKey("adam", "deploy-bot", "read")
    const two = await newKey("adam", "deploy-bot", "read")
    for (const k of [one, two]) expect((await api(server.url, k.key).get("/acme/app")).status).toBe(200)
    const disabled = await as("adam").patch("/orgs/acme/service-accounts/deploy-bot", { disabled: true })
    expect(disabled.body).toMatchObject({ disabled: true })
    for (const k of [one, two]) expect((await api(server.url, k.key).get("/acme/app")).status).toBe(401)
    expect((await as("adam").patch("/orgs/acme/service-accounts/deploy-bot", { disabled: false })).body).toMatchObject({ disabled: false })
    for (const k of [one, two]) expect((await api(server.url, k.key).get("/acme/app")).status).toBe(200)

    expect((await as("adam").delete(`/orgs/acme/service-accounts/deploy-bot/keys/${one.key_id}`)).status).toBe(204)
    expect((await api(server.url, one.key).get("/acme/app")).status).toBe(401)
    expect((await api(server.url, two.key).get("/acme/app")).status).toBe(200)
    expect((await as("adam").delete(`/orgs/acme/service-accounts/deploy-bot/keys/${one.key_id}`)).status).toBe(404)

    expect((await as("adam").delete("/orgs/acme/service-accounts/deploy-bot")).status).toBe(204)
    expect((await api(server.url, two.key).get("/acme/app")).status).toBe(401)
    expect((await as("adam").get("/orgs/acme/service-accounts")).body.service_accounts).toEqual([])
  })

  it("its actions appear in the audit log under its own name; no entry holds a secret", async () => {
    expect((await as("adam").post("/orgs/acme/service-accounts", { name: "ci" })).status).toBe(201)
    const key = await newKey("adam", "ci", "read,admin")
    expect((await api(server.url, key.key).post("/orgs/acme/groups", { slug: "bots" })).status).toBe(201)
    const entries = (await as("olga").get("/orgs/acme/audit?actor=service:ci")).body.entries as Array<{ action: string }>
    expect(entries.map((e) => e.action)).toEqual(["group.create"])
    const all = JSON.stringify((await as("olga").get("/orgs/acme/audit?limit=200")).body)
    expect(all).toContain("sa.key.create")
    expect(all).toContain("sa.disable")
    expect(all).toContain("sa.key.revoke")
    expect(all).not.toContain(key.key)
    expect(all).not.toContain(key.key.slice(12))
  })

  it("personal keys: creation and revocation are audited on the personal organization, without the secret", async () => {
    const created = await as("mia").post("/api-keys", { name: "laptop" })
    expect(created.status).toBe(201)
    expect((await api(server.url, created.body.key).get("/whoami")).body).toMatchObject({ name: "mia" })
    expect((await as("mia").delete(`/api-keys/${created.body.id}`)).status).toBe(204)
    expect((await api(server.url, created.body.key).get("/whoami")).status).toBe(401)
    expect((await as("mia").delete(`/api-keys/${created.body.id}`)).status).toBe(404)
    const entries = (await as("mia").get("/orgs/mia/audit")).body.entries as Array<{ action: string; target: string; details: Record<string, unknown> }>
    expect(entries.slice(0, 2).map((e) => [e.action, e.target])).toEqual([["key.revoke", "laptop"], ["key.create", "laptop"]])
    expect(JSON.stringify(entries)).not.toContain(created.body.key)
  })
})
