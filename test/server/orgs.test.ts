/**
 * Organizations, members and groups against the real server: every endpoint, the role rules
 * (owner/admin manage, a member gets 403, a non-member 404; only owners touch the owner role;
 * the last owner stays), deletion (refused while repositories remain and for personal
 * organizations; the slug is free again afterwards), what roles mean for repositories, the audit
 * rows every change writes, an instance admin's quota, and a replayed Idempotency-Key.
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
  tokens.root = await server.createUser("root", { admin: true })
  for (const user of ["olga", "adam", "mia", "nina", "otto"]) tokens[user] = await server.createUser(user)
  expect((await as("olga").post("/orgs", { slug: "acme", name: "Acme", description: "Widgets" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const audit = async (action: string) =>
  ((await as("olga").get(`/orgs/acme/audit?action=${encodeURIComponent(action)}`)).body.entries as Array<{ actor: string; target: string; details: Record<string, unknown> }>)

describe("organizations", () => {
  it("adds members with roles; members list them; managing needs owner or admin", async () => {
    const added = await as("olga").post("/orgs/acme/members", { username: "adam", role: "admin" })
    expect(added.status, JSON.stringify(added.body)).toBe(201)
    expect(added.body).toMatchObject({ username: "adam", role: "admin" })
    expect((await as("adam").post("/orgs/acme/members", { username: "mia" })).body).toMatchObject({ username: "mia", role: "member" })

    const listed = await as("mia").get("/orgs/acme/members")
    expect(listed.status).toBe(200)
    expect((listed.body.members as Array<{ username: string; role: string }>).map((m) => `${m.username}:${m.role}`))
      .toEqual(["adam:admin", "mia:member", "olga:owner"])

    // A plain member sees the organization but may not manage it; a non-member does not see it.
    const byMember = await as("mia").post("/orgs/acme/members", { username: "nina" })
    expect(byMember.status).toBe(403)
    expect((await as("nina").post("/orgs/acme/members", { username: "nina" })).status).toBe(404)
    expect((await as("nina").get("/orgs/acme/members")).status).toBe(404)
    expect((await api(server.url).get("/orgs/acme/members")).status).toBe(404)

    expect((await as("olga").post("/orgs/acme/members", { username: "mia" })).body).toMatchObject({ code: "already_member" })
    const unknown = await as("olga").post("/orgs/acme/members", { username: "nobody" })
    expect([unknown.status, unknown.body.code]).toEqual([404, "user_not_found"])
    const badRole = await as("olga").post("/orgs/acme/members", { username: "nina", role: "king" })
    expect(badRole.status).toBe(400)
    expect((await as("olga").patch("/orgs/acme/members/mia", { role: "superuser" })).status).toBe(400)

    const entries = await audit("member.add")
    expect(entries.map((e) => [e.actor, e.target, e.details.role])).toEqual([["adam", "mia", "member"], ["olga", "adam", "admin"]])
  })

  it("only an owner grants, changes or removes the owner role; the last owner stays", async () => {
    const byAdmin = await as("adam").patch("/orgs/acme/members/mia", { role: "owner" })
    expect([byAdmin.status, byAdmin.body.code]).toEqual([403, "owner_required"])
    expect((await as("adam").patch("/orgs/acme/members/olga", { role: "member" })).status).toBe(403)
    expect((await as("adam").delete("/orgs/acme/members/olga")).status).toBe(403)

    const lastDemote = await as("olga").patch("/orgs/acme/members/olga", { role: "admin" })
    expect([lastDemote.status, lastDemote.body.code]).toEqual([409, "last_owner"])
    const lastRemove = await as("olga").delete("/orgs/acme/members/olga")
    expect([lastRemove.status, lastRemove.body.code]).toEqual([409, "last_owner"])

    // With a second owner, the first may step down.
    expect((await as("olga").patch("/orgs/acme/members/adam", { role: "owner" })).body).toMatchObject({ role: "owner" })
    expect((await as("olga").patch("/orgs/acme/members/olga", { role: "admin" })).body).toMatchObject({ role: "admin" })
    expect((await as("adam").patch("/orgs/acme/members/olga", { role: "owner" })).body).toMatchObject({ role: "owner" })
    expect((await as("olga").patch("/orgs/acme/members/adam", { role: "admin" })).body).toMatchObject({ role: "admin" })
    const roles = await audit("member.role")
    expect(roles[0]).toMatchObject({ actor: "olga", target: "adam", details: { from: "owner", role: "admin" } })
    expect((await as("olga").patch("/orgs/acme/members/nobody", { role: "admin" })).status).toBe(404)
  })

  it("groups hold organization members only; removing a member takes them out of its groups", async () => {
    const created = await as("adam").post("/orgs/acme/groups", { slug: "ops", description: "Operations" })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    expect(created.body).toMatchObject({ slug: "ops", description: "Operations", members: [] })
    expect((await as("adam").post("/orgs/acme/groups", { slug: "ops" })).status).toBe(409)
    expect((await as("mia").post("/orgs/acme/groups", { slug: "devs" })).status).toBe(403)
    expect((await as("nina").post("/orgs/acme/groups", { slug: "devs" })).status).toBe(404)
    expect((await as("adam").post("/orgs/acme/groups", { slug: "Bad Name" })).status).toBe(400)

    expect((await as("adam").post("/orgs/acme/groups/ops/members", { username: "mia" })).body).toMatchObject({ members: ["mia"] })
    const outsider = await as("adam").post("/orgs/acme/groups/ops/members", { username: "nina" })
    expect([outsider.status, outsider.body.code]).toEqual([404, "not_member"])
    expect((await as("adam").post("/orgs/acme/groups/ops/members", { username: "mia" })).status).toBe(409)
    expect((await as("adam").post("/orgs/acme/groups/none/members", { username: "mia" })).status).toBe(404)
    expect((await as("adam").post("/orgs/acme/groups/ops/members", { username: "adam" })).body.members).toEqual(["adam", "mia"])

    const listed = await as("mia").get("/orgs/acme/groups")
    expect(listed.body.groups).toMatchObject([{ slug: "ops", members: ["adam", "mia"] }])

    expect((await as("adam").delete("/orgs/acme/groups/ops/members/adam")).status).toBe(204)
    expect((await as("adam").delete("/orgs/acme/groups/ops/members/adam")).status).toBe(404)

    // mia leaves the organization: she leaves its groups too.
    expect((await as("adam").delete("/orgs/acme/members/mia")).status).toBe(204)
    expect((await as("adam").get("/orgs/acme/groups")).body.groups).toMatchObject([{ slug: "ops", members: [] }])
    expect((await as("mia").get("/orgs/acme")).status).toBe(404)
    expect((await as("adam").post("/orgs/acme/members", { username: "mia" })).status).toBe(201)

    expect((await as("adam").delete("/orgs/acme/groups/ops")).status).toBe(204)
    expect((await as("adam").delete("/orgs/acme/groups/ops")).status).toBe(404)
    expect((await audit("group.create"))[0]).toMatchObject({ actor: "adam", target: "acme/ops" })
    expect((await audit("group.member.add")).map((e) => e.details.username)).toEqual(["adam", "mia"])
    expect((await audit("group.delete")).length).toBe(1)
  })

  it("roles on repositories: members read and push branches; merging and settings need an admin", async () => {
    expect((await as("olga").post("/repos", { name: "app", organization_slug: "acme" })).status).toBe(201)
    expect((await as("mia").get("/acme/app")).status).toBe(200)
    expect((await as("nina").get("/acme/app")).status).toBe(404)
    const commit = buildCommit({ branch: "feature", files: { "a.txt": "a\n" } })
    const pushed = await as("mia").post("/acme/app/push", pushBody({ branch: "feature", commits: [commit], description: "Feature" }))
    expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
    const memberMerge = await as("mia").post("/acme/app/branches/feature/merge")
    expect(memberMerge.status).toBe(403)
    expect((await as("mia").patch("/acme/app/visibility", { is_public: true })).status).toBe(403)
    expect((await as("mia").delete("/acme/app")).status).toBe(403)
    expect((await as("adam").post("/acme/app/branches/feature/merge")).status).toBe(200)
  })

  it("updates name and description; deletes only an empty, non-personal organization; the slug is free again", async () => {
    expect((await as("mia").patch("/orgs/acme", { name: "Nope" })).status).toBe(403)
    const updated = await as("adam").patch("/orgs/acme", { name: "Acme Inc", description: null })
    expect(updated.status, JSON.stringify(updated.body)).toBe(200)
    expect(updated.body).toMatchObject({ slug: "acme", name: "Acme Inc" })
    expect(updated.body.description).toBeUndefined()
    expect((await as("mia").get("/orgs/acme")).body).toMatchObject({ name: "Acme Inc", role: "member" })
    expect((await as("adam").patch("/orgs/acme", { name: "" })).status).toBe(400)

    const notEmpty = await as("olga").delete("/orgs/acme")
    expect(notEmpty.status).toBe(409)
    expect(notEmpty.body).toMatchObject({ code: "org_not_empty", repositories: ["acme/app"] })
    expect(notEmpty.body.error).toContain("acme/app")
    // Only owners delete an organization.
    expect((await as("adam").delete("/orgs/acme")).status).toBe(403)

    const personal = await as("olga").delete("/orgs/olga")
    expect([personal.status, personal.body.code]).toEqual([409, "personal_organization"])

    expect((await as("olga").delete("/acme/app")).status).toBe(204)
    expect((await as("olga").delete("/orgs/acme")).status).toBe(204)
    expect((await as("olga").get("/orgs/acme")).status).toBe(404)
    expect((await as("mia").get("/orgs")).body.organizations.map((o: { slug: string }) => o.slug)).toEqual(["mia"])
    const again = await as("nina").post("/orgs", { slug: "acme", name: "Acme again" })
    expect(again.status).toBe(201)
    expect((await as("nina").get("/orgs/acme/members")).body.members.map((m: { username: string }) => m.username)).toEqual(["nina"])
  })

  it("an instance admin sets one organization's quota; nobody else may", async () => {
    const byOwner = await api(server.url, tokens.nina).raw("PUT", "/orgs/acme/quota", { quota_bytes: 1 })
    expect(byOwner.status).toBe(403)
    expect((await api(server.url, tokens.otto).raw("PUT", "/orgs/acme/quota", { quota_bytes: 1 })).status).toBe(404)
    const set = await api(server.url, tokens.root).raw("PUT", "/orgs/acme/quota", { quota_bytes: 12345 })
    expect(set.status, JSON.stringify(set.body)).toBe(200)
    expect(set.body).toEqual({ slug: "acme", quota_bytes: 12345 })
    expect((await as("nina").get("/orgs/acme/storage")).body).toMatchObject({ quota_bytes: 12345 })
    expect((await api(server.url, tokens.root).raw("PUT", "/orgs/acme/quota", { quota_bytes: -1 })).status).toBe(400)
  })

  it("replays a change sent again with the same Idempotency-Key", async () => {
    const headers = { "idempotency-key": "add-otto-1" }
    const first = await api(server.url, tokens.nina).raw("POST", "/orgs/acme/members", { username: "otto" }, headers)
    expect(first.status).toBe(201)
    const again = await api(server.url, tokens.nina).raw("POST", "/orgs/acme/members", { username: "otto" }, headers)
    expect(again.status).toBe(201)
    expect(again.body).toEqual(first.body)
    const other = await api(server.url, tokens.nina).raw("POST", "/orgs/acme/members", { username: "mia" }, headers)
    expect([other.status, other.body.code]).toEqual([409, "idempotency_key_reused"])
  })
})
