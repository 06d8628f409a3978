/**
 * `grove org`, `grove sa` and `grove perms` (show, propose) end to end against the real server with the real
 * binary: organizations and members, service accounts and their keys (a key used through
 * `SERVICE_API_KEY`, stopped by `sa disable`), the parse of a permissions file, and the exit codes
 * (1 when the server says no, 2 for a bad argument).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import { buildCommit, pushBody } from "../support/content.ts"
import type { GroveServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { grove, type GroveOptions, json, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let olga: GroveOptions
let mia: GroveOptions
let olgaKey: string

beforeAll(async () => {
  server = await startSuiteServer()
  olgaKey = await server.createUser("olga")
  olga = userOf(server, "olga", olgaKey)
  mia = userOf(server, "mia", await server.createUser("mia"))
}, 300_000)

afterAll(stopSuiteServers)

describe("grove org, sa and perms", () => {
  it("org: create, show, add, role, members, remove", async () => {
    expect(json(await ok(["org", "create", "acme", "--name", "Acme", "--json"], olga))).toMatchObject({ slug: "acme", role: "owner" })
    expect((await ok(["org", "show", "acme"], olga)).stdout).toContain("acme: Acme")
    expect(json(await ok(["org", "add", "acme", "mia", "--json"], olga))).toMatchObject({ username: "mia", role: "member" })
    // A member may not manage members: the server's 403, exit 1.
    const denied = await grove(["org", "add", "acme", "olga", "--json"], mia)
    expect(denied.code).toBe(1)
    expect(json(denied)).toMatchObject({ status: 403 })
    expect(json(await ok(["org", "role", "acme", "mia", "admin", "--json"], olga))).toMatchObject({ role: "admin" })
    const listed = await ok(["org", "members", "acme"], mia)
    expect(listed.stdout).toMatch(/USER\s+ROLE/)
    expect(listed.stdout).toMatch(/mia\s+admin/)
    expect(listed.stdout).toMatch(/olga\s+owner/)
    const last = await grove(["org", "remove", "acme", "olga", "--json"], olga)
    expect([last.code, json(last).code]).toEqual([1, "last_owner"])
    expect((await grove(["org", "role", "acme", "mia", "king"], olga)).code).toBe(2)
    expect((await grove(["org", "show", "Not A Slug"], olga)).code).toBe(2)
    await ok(["org", "remove", "acme", "mia"], olga)
    expect((await grove(["org", "show", "acme", "--json"], mia)).code).toBe(1)
  })

  it("sa: accounts and keys; a key works through SERVICE_API_KEY until the account is disabled", async () => {
    await ok(["repo", "create", "app", "--org", "acme"], olga)
    expect(json(await ok(["sa", "create", "bot", "--org", "acme", "--display-name", "Bot", "--json"], olga))).toMatchObject({ name: "bot", disabled: false })
    const created = json(await ok(["sa", "key", "create", "bot", "ci", "--org", "acme", "--scopes", "read,write", "--json"], olga))
    expect(created.key).toMatch(/^grove_/)
    expect((await ok(["sa", "key", "create", "bot", "ci2", "--org", "acme", "--scopes", "read"], olga)).stdout).toContain("shown once")
    const keys = json(await ok(["sa", "key", "list", "bot", "--org", "acme", "--json"], olga)).keys as Array<{ key_id: string; scopes: string }>
    expect(keys.map((k) => k.scopes)).toEqual(["read,write", "read"])
    expect(JSON.stringify(keys)).not.toContain(created.key)
    expect((await grove(["sa", "key", "create", "bot", "x", "--org", "acme", "--scopes", "fly"], olga)).code).toBe(2)

    const asBot: GroveOptions = { home: tempDir("bot"), env: { GROVE_REMOTE: server.url, SERVICE_API_KEY: created.key } }
    expect(json(await ok(["repo", "show", "acme/app", "--json"], asBot))).toMatchObject({ full_name: "acme/app" })
    await ok(["sa", "disable", "bot", "--org", "acme"], olga)
    const stopped = await grove(["repo", "show", "acme/app", "--json"], asBot)
    expect(stopped.code).toBe(6)
    await ok(["sa", "enable", "bot", "--org", "acme"], olga)
    await ok(["repo", "show", "acme/app"], asBot)
    await ok(["sa", "key", "revoke", "bot", created.key_id, "--org", "acme"], olga)
    expect((await grove(["repo", "show", "acme/app"], asBot)).code).toBe(6)
    expect((await ok(["sa", "list", "--org", "acme"], olga)).stdout).toMatch(/bot\s+Bot\s+enabled/)
    await ok(["sa", "delete", "bot", "--org", "acme"], olga)
    expect(json(await ok(["sa", "list", "--org", "acme", "--json"], olga))).toEqual({ service_accounts: [] })
  })

  it("perms show: rules, warnings with lines, enforcement", async () => {
    expect((await ok(["perms", "show", "acme/app"], olga)).stdout).toContain("nothing is restricted")
    const c = buildCommit({ branch: "perms", files: { ".oak/PERMISSIONS": "/secret/ @olga\n/x/ @ghost\n", "a.txt": "a\n" } })
    expect((await api(server.url, olgaKey).post("/acme/app/push", pushBody({ branch: "perms", commits: [c], description: "Perms" }))).body.success).toBe(true)
    expect((await api(server.url, olgaKey).post("/acme/app/branches/perms/merge")).status).toBe(200)
    const shown = await ok(["perms", "show", "acme/app"], olga)
    expect(shown.stdout).toMatch(/1\s+\/secret\/\s+@olga/)
    expect(shown.stdout).toContain("line 2: ")
    expect(json(await ok(["perms", "show", "acme/app", "--json"], olga))).toMatchObject({ enforced: true, principals: ["@olga", "@ghost"] })
    expect((await grove(["perms", "show", "nope"], olga)).code).toBe(2)

    const file = `${tempDir("perms")}/PERMISSIONS`
    fs.writeFileSync(file, "/docs/ *\n")
    const proposal = json(await ok(["perms", "propose", "acme/app", file, "--description", "Open docs", "--json"], olga))
    expect(proposal.branch).toMatch(/^permissions-/)
    expect((await api(server.url, olgaKey).get(`/acme/app/raw/${proposal.branch}/.oak/PERMISSIONS`)).body).toBe("/docs/ *\n")
    expect((await ok(["perms", "propose", "acme/app", "--delete"], olga)).stdout).toContain("Proposed on branch permissions-")
    expect((await grove(["perms", "propose", "acme/app"], olga)).code).toBe(2)
    const denied = await grove(["perms", "propose", "acme/app", "--delete", "--json"], mia)
    expect(denied.code).toBe(1)
  })
})
