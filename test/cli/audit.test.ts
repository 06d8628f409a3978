/**
 * `grove audit` end to end against the real server: the organization's log newest first, with
 * `--json` (the API's entries) and as a table, the filters, and the exit codes: 1 for a hidden
 * organization (404), 6 without a credential (401), 2 for a bad argument.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { GroveServer } from "../support/GroveServer.ts"
import { grove, type GroveOptions, json, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions
let bob: GroveOptions

beforeAll(async () => {
  server = await startSuiteServer()
  alice = userOf(server, "alice", await server.createUser("alice"))
  bob = userOf(server, "bob", await server.createUser("bob"))
  await ok(["repo", "create", "tools"], alice)
  await ok(["repo", "visibility", "public", "alice/tools"], alice)
  await ok(["repo", "delete", "alice/tools", "--yes"], alice)
}, 300_000)

afterAll(stopSuiteServers)

describe("grove audit", () => {
  it("--json: the caller's organization's entries, newest first, with actor, action, target and details", async () => {
    const run = await ok(["audit", "--json"], alice)
    const entries = json(run) as Array<{ actor: string; action: string; target: string; details: unknown; created_at: string }>
    expect(entries.map((e) => [e.action, e.target])).toEqual([
      ["repo.delete", "alice/tools"],
      ["repo.visibility", "alice/tools"],
      ["repo.create", "alice/tools"],
      ["user.create", "alice"]
    ])
    expect(entries[1]).toMatchObject({ actor: "alice", details: { public: true } })
    expect(json(await ok(["audit", "--org", "alice", "--action", "repo.visibility", "--json"], alice)).length).toBe(1)
    expect(json(await ok(["audit", "--actor", "admin", "--json"], alice)).map((e: { action: string }) => e.action)).toEqual(["user.create"])
  })

  it("prints a table, or says there is nothing", async () => {
    const run = await ok(["audit", "--action", "repo.visibility"], alice)
    expect(run.stdout).toMatch(/TIME\s+ACTOR\s+ACTION\s+TARGET\s+DETAILS/)
    expect(run.stdout).toMatch(/alice\s+repo\.visibility\s+alice\/tools\s+public=true/)
    expect((await ok(["audit", "--actor", "nobody"], alice)).stdout.trim()).toBe("No audit entries in alice.")
  })

  it("exit codes: 1 for an organization the caller cannot see, 6 without a credential, 2 for a bad argument", async () => {
    const hidden = await grove(["audit", "--org", "alice", "--json"], bob)
    expect(hidden.code).toBe(1)
    expect(json(hidden)).toMatchObject({ status: 404 })
    const anonymous = await grove(["audit", "--org", "alice", "--json"], { home: tempDir("anon"), env: { GROVE_REMOTE: server.url } })
    expect(anonymous.code).toBe(6)
    expect(json(anonymous)).toMatchObject({ status: 401 })
    const bad = await grove(["audit", "--org", "Not A Slug", "--json"], alice)
    expect(bad.code).toBe(2)
    expect(json(bad)).toMatchObject({ code: "usage" })
  })
})
