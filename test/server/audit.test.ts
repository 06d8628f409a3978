/**
 * The audit log (`GET /api/orgs/{slug}/audit`) against the real server: the actions that write audit
 * rows today (visibility, transfer, delete, a forced merge) appear newest first with actor and target;
 * the filters, paging, who may read it, and that no entry holds a secret.
 *
 * No endpoint adds members yet, and the CI gate's records are written by CI that does not exist yet:
 * the test stops the server, writes a `memberships` row (bob, a plain member) and a failing `ci_runs`
 * record into the embedded database directly, and starts the server again on the same data directory.
 */
import { PGlite } from "@electric-sql/pglite"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let dataDir: string
let server: GroveServer
const tokens: Record<string, string> = {}
const as = (user: string) => api(server.url, tokens[user])

interface Entry {
  id: string
  actor: string
  action: string
  target: string
  details: Record<string, unknown>
  created_at: string
}

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-audit-"))
  server = await startServer({ dataDir })
  for (const user of ["ada", "bob", "cy", "eve"]) tokens[user] = await server.createUser(user)
  expect((await as("ada").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  for (const name of ["shown", "moved", "gone", "gated"]) {
    expect((await as("ada").post("/repos", { name, organization_slug: "acme" })).status).toBe(201)
  }
  const c = buildCommit({ branch: "ci", files: { "app.txt": "v1\n" } })
  expect((await as("ada").post("/acme/gated/push", pushBody({ branch: "ci", commits: [c], description: "Gated" }))).body.success).toBe(true)

  // Outside the API: bob becomes a plain member, cy an admin, and CI fails on the branch head.
  await server.stop()
  const db = await PGlite.create(path.join(dataDir, "db"))
  await db.query(`INSERT INTO memberships (org_id, user_id, role)
    SELECT o.id, u.id, 'member' FROM organizations o, users u WHERE o.slug = 'acme' AND u.username = 'bob'`)
  await db.query(`INSERT INTO memberships (org_id, user_id, role)
    SELECT o.id, u.id, 'admin' FROM organizations o, users u WHERE o.slug = 'acme' AND u.username = 'cy'`)
  await db.query(`INSERT INTO ci_runs (repo_id, workflow_name, workflow_path, event, branch, commit_hash, triggered_by, status, conclusion, queued_at)
    SELECT r.id, 'test', '.oak/workflows/test.yml', 'push', 'ci', $1, 'ada', 'completed', 'failure', now()
    FROM repositories r WHERE r.name = 'gated'`, [c.commit.hash])
  await db.close()
  server = await startServer({ dataDir })

  expect((await as("ada").patch("/acme/shown/visibility", { is_public: true })).status).toBe(200)
  expect((await as("ada").post("/acme/moved/transfer", { to_organization: "ada" })).status).toBe(200)
  expect((await as("ada").delete("/acme/gone")).status).toBe(204)
  expect((await as("ada").post("/acme/gated/branches/ci/merge")).status).toBe(412)
  const forced = await as("ada").post("/acme/gated/branches/ci/merge?force=1")
  expect(forced.status, JSON.stringify(forced.body)).toBe(200)
  // A member's own write is audited under the member's name.
  expect((await as("bob").post("/repos", { name: "bobs", organization_slug: "acme" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
  if (dataDir !== undefined) fs.rmSync(dataDir, { recursive: true, force: true })
})

const audit = async (query = "", user = "ada") => {
  const reply = await as(user).get(`/orgs/acme/audit${query}`)
  expect(reply.status, JSON.stringify(reply.body)).toBe(200)
  return reply.body.entries as Array<Entry>
}

describe("GET /orgs/{slug}/audit", () => {
  it("lists the audited actions newest first, each with its actor, time, action, target and details", async () => {
    const entries = await audit()
    expect(entries.map((e) => [e.action, e.actor, e.target])).toEqual([
      ["repo.create", "bob", "acme/bobs"],
      ["branch.merge.forced", "ada", "acme/gated"],
      ["repo.delete", "ada", "acme/gone"],
      ["repo.transfer.out", "ada", "acme/moved"],
      ["repo.visibility", "ada", "acme/shown"],
      ["repo.create", "ada", "acme/gated"],
      ["repo.create", "ada", "acme/gone"],
      ["repo.create", "ada", "acme/moved"],
      ["repo.create", "ada", "acme/shown"],
      ["org.create", "ada", "acme"]
    ])
    expect(entries.find((e) => e.action === "repo.visibility")!.details).toEqual({ public: true })
    expect(entries.find((e) => e.action === "repo.transfer.out")!.details).toEqual({ to: "ada/moved" })
    expect(entries.find((e) => e.action === "branch.merge.forced")!.details).toMatchObject({ branch: "ci", ci_gate_overridden: true })
    const times = entries.map((e) => Date.parse(e.created_at))
    expect(times.every((t) => !Number.isNaN(t))).toBe(true)
    expect([...times].sort((x, y) => y - x)).toEqual(times)
    expect(new Set(entries.map((e) => e.id)).size).toBe(entries.length)
    // The transfer's other half is in the receiving organization's log, not this one.
    const personal = (await as("ada").get("/orgs/ada/audit")).body.entries as Array<Entry>
    expect(personal.map((e) => [e.action, e.target])).toContainEqual(["repo.transfer.in", "ada/moved"])
  })

  it("filters by action, actor and since", async () => {
    expect((await audit("?action=repo.delete")).map((e) => e.target)).toEqual(["acme/gone"])
    expect((await audit("?action=branch.merge.forced")).map((e) => e.target)).toEqual(["acme/gated"])
    expect((await audit("?actor=bob")).map((e) => e.action)).toEqual(["repo.create"])
    expect((await audit("?actor=ada&action=repo.create")).map((e) => e.target)).toEqual(["acme/gated", "acme/gone", "acme/moved", "acme/shown"])
    expect(await audit("?actor=nobody")).toEqual([])
    const all = await audit()
    const visibility = all.find((e) => e.action === "repo.visibility")!
    const since = await audit(`?since=${encodeURIComponent(visibility.created_at)}`)
    expect(since.map((e) => e.id)).toEqual(all.slice(0, all.indexOf(visibility) + 1).map((e) => e.id).filter((id) =>
      Date.parse(all.find((e) => e.id === id)!.created_at) >= Date.parse(visibility.created_at)
    ))
    expect(since.map((e) => e.action)).not.toContain("org.create")
    expect(since.map((e) => e.action)).toContain("repo.visibility")
    expect(await audit(`?since=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`)).toEqual([])
    const bad = await as("ada").get("/orgs/acme/audit?since=yesterday")
    expect(bad.status).toBe(400)
  })

  it("pages through the log with limit and the opaque cursor (X-Next-Cursor, Link), every entry once in order", async () => {
    const all = await audit()
    const seen: Array<string> = []
    let query = "?limit=3"
    let pages = 0
    for (;;) {
      const reply = await as("ada").get(`/orgs/acme/audit${query}`)
      expect(reply.status).toBe(200)
      pages++
      seen.push(...(reply.body.entries as Array<Entry>).map((e) => e.id))
      const next = reply.headers.get("x-next-cursor")
      if (next === null) break
      expect(reply.headers.get("link")).toContain(`cursor=${next}`)
      expect(reply.headers.get("link")).toContain('rel="next"')
      query = `?limit=3&cursor=${next}`
    }
    expect(pages).toBe(Math.ceil(all.length / 3))
    expect(seen).toEqual(all.map((e) => e.id))
    // Paging keeps the filter.
    const first = await as("ada").get("/orgs/acme/audit?action=repo.create&limit=2")
    expect(first.body.entries.map((e: Entry) => e.target)).toEqual(["acme/bobs", "acme/gated"])
    const second = await as("ada").get(`/orgs/acme/audit?action=repo.create&limit=2&cursor=${first.headers.get("x-next-cursor")}`)
    expect(second.body.entries.map((e: Entry) => e.target)).toEqual(["acme/gone", "acme/moved"])
    expect((await as("ada").get("/orgs/acme/audit?cursor=bm9wZQ")).status).toBe(400)
    expect((await as("ada").get(`/orgs/acme/audit?cursor=${Buffer.from('["x"]').toString("base64url")}`)).status).toBe(400)
    expect((await as("ada").get("/orgs/acme/audit?limit=0")).status).toBe(400)
    expect((await as("ada").get("/orgs/acme/audit?limit=201")).status).toBe(400)
  })

  it("is for owners and admins: a plain member gets 403, a non-member 404, anonymous 401", async () => {
    const member = await as("bob").get("/orgs/acme/audit")
    expect(member.status).toBe(403)
    expect(member.body.code).toBe("forbidden")
    expect((await as("bob").get("/orgs/acme")).status).toBe(200)
    // An admin who is not an owner reads it, the same entries as the owner.
    const admin = await as("cy").get("/orgs/acme/audit")
    expect(admin.status, JSON.stringify(admin.body)).toBe(200)
    expect(admin.body.entries.map((e: Entry) => e.id)).toEqual((await audit()).map((e) => e.id))
    const outsider = await as("eve").get("/orgs/acme/audit")
    expect(outsider.status).toBe(404)
    expect(outsider.body.code).toBe("not_found")
    // Hidden answers like missing.
    const missing = await as("eve").get("/orgs/nowhere/audit")
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"])
    expect((await api(server.url).get("/orgs/acme/audit")).status).toBe(401)
    expect((await api(server.url, "grove_notatoken").get("/orgs/acme/audit")).status).toBe(401)
    // Each user owns the personal organization's log.
    expect((await as("eve").get("/orgs/eve/audit")).status).toBe(200)
  })

  it("no entry holds a secret: no token, key or password appears anywhere in the log", async () => {
    const logs = await Promise.all(["acme", "ada"].map((slug) => as("ada").get(`/orgs/${slug}/audit`)))
    const text = JSON.stringify(logs.map((l) => l.body))
    for (const token of Object.values(tokens)) expect(text).not.toContain(token)
    expect(text).not.toMatch(/grove_[A-Za-z0-9]/)
    expect(text).not.toMatch(/secret|password|token/i)
  })
})
