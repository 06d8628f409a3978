/**
 * Issue 22's rough edges, with the real `grove` binary against a real server: the server a login
 * names is remembered (the default outside a checkout; --remote and GROVE_REMOTE override it); team
 * admin from the CLI (org list, groups, personal keys, the scope words of both kinds of key).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { grove, type GroveOptions, json, ok, oneTimeCode, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let annKey: string
let bob: GroveOptions
const PASSWORD = "ann-password-1"

beforeAll(async () => {
  server = await startSuiteServer()
  annKey = await server.createUser("ann", { password: PASSWORD, admin: true })
  bob = userOf(server, "bob", await server.createUser("bob"))
}, 300_000)

afterAll(stopSuiteServers)

describe("the server is remembered after login", () => {
  it("grove login --remote URL, then grove repo list outside a checkout talks to URL; --remote and GROVE_REMOTE override it", async () => {
    // No GROVE_REMOTE: exactly what a new user has.
    const home = tempDir("home")
    const code = await oneTimeCode(server.url, "ann", PASSWORD)
    await ok(["login", "--headless", "--remote", server.url], { home, input: `${code}\n` })
    await ok(["repo", "create", "remembered"], { home })
    const listed = await ok(["repo", "list", "--json"], { home })
    expect(json(listed).repos.map((r: { full_name: string }) => r.full_name)).toEqual(["ann/remembered"])
    const status = json(await ok(["auth", "status", "--json"], { home, cwd: path.join(home) }))
    expect(status).toMatchObject({ remote: server.url, whoami: { name: "ann" } })

    // The overrides still win: a closed port named either way is what is tried.
    const elsewhere = "http://127.0.0.1:9"
    for (const options of [{ home, env: { GROVE_REMOTE: elsewhere } }, { home }]) {
      const args = options.env === undefined ? ["repo", "list", "--remote", elsewhere] : ["repo", "list"]
      const run = await grove(args, options)
      expect(run.code, run.stderr).toBe(6)
      expect(run.stderr).toContain(`cannot connect to ${elsewhere}`)
    }

    // A newer login to another server becomes the default; logging out of it does not forget the first.
    const credentials = path.join(home, ".grove", "credentials")
    const stored = JSON.parse(fs.readFileSync(credentials, "utf8"))
    fs.writeFileSync(credentials, JSON.stringify({ ...stored, [elsewhere]: { ...stored[server.url], created_at: new Date(Date.now() + 1000).toISOString() } }), { mode: 0o600 })
    expect((await grove(["repo", "list"], { home })).stderr).toContain(`cannot connect to ${elsewhere}`)
    await ok(["logout"], { home })
    expect(Object.keys(JSON.parse(fs.readFileSync(credentials, "utf8")))).toEqual([server.url])
    await ok(["repo", "show", "ann/remembered"], { home })
  }, 60_000)
})

describe("team admin from the CLI", () => {
  it("org list; group create, add, list, remove, delete; personal keys create (shown once), list, revoke; the scope words", async () => {
    const ann = userOf(server, "ann", annKey)
    await ok(["org", "create", "acme"], ann)
    await ok(["org", "add", "acme", "bob"], ann)
    const orgs = json(await ok(["org", "list", "--json"], ann)).organizations
    expect(orgs.map((o: { slug: string; role: string }) => [o.slug, o.role])).toEqual(expect.arrayContaining([["acme", "owner"], ["ann", "owner"]]))
    expect((await ok(["org", "list"], bob)).stdout).toMatch(/^acme\s+acme\s+member\s/m)

    expect((await ok(["group", "create", "backend", "--org", "acme", "--description", "Server people"], ann)).stdout).toContain("Created group @acme/backend")
    await ok(["group", "add", "backend", "bob", "--org", "acme"], ann)
    expect(json(await ok(["group", "list", "--org", "acme", "--json"], bob)).groups).toEqual([
      expect.objectContaining({ slug: "backend", description: "Server people", members: ["bob"] })
    ])
    expect((await ok(["group", "list", "--org", "acme"], bob)).stdout).toMatch(/@acme\/backend\s+bob\s+Server people/)
    // A member reads groups but does not change them: the server's 403, exit 1.
    const refused = await grove(["group", "create", "ops", "--org", "acme"], bob)
    expect(refused.code, refused.stderr).toBe(1)
    await ok(["group", "remove", "backend", "bob", "--org", "acme"], ann)
    expect(json(await ok(["group", "list", "--org", "acme", "--json"], ann)).groups[0].members).toEqual([])
    await ok(["group", "delete", "backend", "--org", "acme"], ann)
    expect(json(await ok(["group", "list", "--org", "acme", "--json"], ann)).groups).toEqual([])
    expect((await grove(["group", "create", "Bad_Name", "--org", "acme"], ann)).code).toBe(2)

    // Personal keys: one `scope` (full or read), as the API names it.
    const created = json(await ok(["key", "create", "reader", "--scope", "read", "--json"], bob))
    expect(created).toMatchObject({ name: "reader", scope: "read", key: expect.stringMatching(/^grove_/) })
    const human = await ok(["key", "create", "laptop"], bob)
    expect(human.stdout).toMatch(/^Created key \S+ \(full\)\. It is shown once:\ngrove_\S+\n$/)
    const withKey = { ...bob, env: { ...bob.env, SERVICE_API_KEY: created.key } }
    expect((await ok(["auth", "status", "--json"], withKey)).stdout).toContain("\"bob\"")
    expect((await grove(["repo", "create", "nope"], withKey)).code).toBe(1)
    const listed = json(await ok(["key", "list", "--json"], bob)).api_keys
    expect(listed.map((k: { name: string; scope: string }) => [k.name, k.scope])).toEqual(expect.arrayContaining([["reader", "read"], ["laptop", "full"]]))
    expect(JSON.stringify(listed)).not.toContain(created.key)
    await ok(["key", "revoke", created.id], bob)
    expect((await grove(["repo", "list"], withKey)).code).toBe(6)

    // A service-account key has a list of `scopes`; --scope is the same flag there.
    await ok(["sa", "create", "deploy-bot", "--org", "acme"], ann)
    const saKey = json(await ok(["sa", "key", "create", "deploy-bot", "ci", "--scope", "read,write", "--org", "acme", "--json"], ann))
    expect(saKey).toMatchObject({ scopes: "read,write" })
  }, 90_000)
})
