/**
 * `grove repo ...` end to end against the real server, with `--json` and human
 * output, and the exit codes: 0 ok, 1 the server said no, 2 usage, 6 network
 * or authentication.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as net from "node:net"
import type { GroveServer } from "../support/GroveServer.ts"
import { grove, type GroveOptions, json, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions
let bob: GroveOptions

beforeAll(async () => {
  server = await startSuiteServer()
  alice = userOf(server, "alice", await server.createUser("alice"))
  bob = userOf(server, "bob", await server.createUser("bob"))
}, 300_000)

afterAll(stopSuiteServers)

describe("grove repo", () => {
  it("create, list, show and delete with --json: one JSON document, the API's response", async () => {
    const created = await grove(["repo", "create", "tools", "--public", "--description", "Shared tools", "--json"], alice)
    expect(created.code, created.stderr).toBe(0)
    expect(json(created)).toMatchObject({
      full_name: "alice/tools",
      owner: "alice",
      name: "tools",
      visibility: "public",
      is_public: true,
      description: "Shared tools",
      head: null
    })

    const list = await grove(["repo", "list", "--sort", "name", "--json"], alice)
    expect(list.code, list.stderr).toBe(0)
    expect(json(list).repos.map((r: { full_name: string }) => r.full_name)).toContain("alice/tools")

    const show = await grove(["repo", "show", "alice/tools", "--json"], alice)
    expect(json(show)).toMatchObject({ full_name: "alice/tools", visibility: "public", default_branch: "main" })

    const deleted = await grove(["repo", "delete", "alice/tools", "--yes", "--json"], alice)
    expect(deleted.code, deleted.stderr).toBe(0)
    expect(json(deleted)).toEqual({ deleted: "alice/tools" })

    const gone = await grove(["repo", "show", "alice/tools", "--json"], alice)
    expect(gone.code).toBe(1)
    expect(json(gone)).toMatchObject({ status: 404, error: expect.any(String) })
  })

  it("create, list, show and delete with human output", async () => {
    const created = await grove(["repo", "create", "notes"], alice)
    expect(created.code, created.stderr).toBe(0)
    expect(created.stdout.trim()).toBe("Created repository alice/notes (private).")
    expect((await grove(["repo", "create", "atlas", "--description", "Maps"], alice)).code).toBe(0)

    const list = await grove(["repo", "list", "--sort", "name"], alice)
    expect(list.code, list.stderr).toBe(0)
    const lines = list.stdout.trim().split("\n")
    expect(lines[0]).toMatch(/^NAME\s+VISIBILITY\s+UPDATED\s+DESCRIPTION$/)
    const names = lines.slice(1).map((line) => line.split(/\s+/)[0])
    expect(names.indexOf("alice/atlas")).toBeLessThan(names.indexOf("alice/notes"))
    expect(list.stdout).toMatch(/alice\/atlas\s+private\s+\S+\s+Maps/)

    const show = await grove(["repo", "show", "alice/notes"], alice)
    expect(show.stdout).toContain("alice/notes (private)")
    expect(show.stdout).toContain("Head:           (empty repository)")
    expect(show.stdout).toContain("Default branch: main")

    const deleted = await grove(["repo", "delete", "alice/notes", "-y"], alice)
    expect(deleted.code, deleted.stderr).toBe(0)
    expect(deleted.stdout.trim()).toBe("Deleted repository alice/notes.")
  })

  it("the server saying no is exit 1 with its message on stderr", async () => {
    expect((await grove(["repo", "create", "dup"], alice)).code).toBe(0)
    const duplicate = await grove(["repo", "create", "dup"], alice)
    expect(duplicate.code).toBe(1)
    expect(duplicate.stdout).toBe("")
    expect(duplicate.stderr).toMatch(/^grove: .+/)
    const duplicateJson = await grove(["repo", "create", "dup", "--json"], alice)
    expect(duplicateJson.code).toBe(1)
    expect(json(duplicateJson)).toMatchObject({ status: 409, code: expect.any(String), error: expect.any(String) })

    // bob cannot see alice's private repository: 404, never 403.
    const hidden = await grove(["repo", "show", "alice/dup", "--json"], bob)
    expect(hidden.code).toBe(1)
    expect(json(hidden)).toMatchObject({ status: 404 })
    const notHis = await grove(["repo", "delete", "alice/dup", "--yes"], bob)
    expect(notHis.code).toBe(1)
    expect((await grove(["repo", "show", "alice/dup"], alice)).code).toBe(0)

    const inOrg = await grove(["repo", "create", "x", "--org", "no-such-org", "--json"], alice)
    expect(inOrg.code).toBe(1)
  })

  it("usage errors are exit 2, before anything is sent", async () => {
    for (
      const args of [
        ["repo", "list", "--sort", "size"],
        ["repo", "show", "no-slash"],
        ["repo", "create"],
        ["repo", "create", "bad name"],
        ["repo", "frobnicate"]
      ]
    ) {
      const result = await grove(args, alice)
      expect(result.code, args.join(" ")).toBe(2)
      expect(result.stdout).toBe("")
    }
    // Deleting from a pipe needs --yes.
    expect((await grove(["repo", "create", "keep"], alice)).code).toBe(0)
    const piped = await grove(["repo", "delete", "alice/keep"], { ...alice, input: "alice/keep\n" })
    expect(piped.code).toBe(2)
    expect(piped.stderr).toContain("without --yes")
    expect((await grove(["repo", "show", "alice/keep"], alice)).code).toBe(0)
  })

  it("on a terminal, delete asks for the repository's name and deletes only when it is typed", async () => {
    expect((await grove(["repo", "create", "confirm-me"], alice)).code).toBe(0)
    const declined = await grove(["repo", "delete", "alice/confirm-me"], { ...alice, terminal: true, input: "alice/other\n" })
    expect(declined.stdout).toContain("Type alice/confirm-me to confirm: ")
    expect(declined.stdout).toContain("not confirmed; nothing was deleted")
    expect(declined.code).toBe(1)
    expect((await grove(["repo", "show", "alice/confirm-me"], alice)).code).toBe(0)

    const confirmed = await grove(["repo", "delete", "alice/confirm-me"], { ...alice, terminal: true, input: "alice/confirm-me\n" })
    expect(confirmed.code, confirmed.stdout).toBe(0)
    expect(confirmed.stdout).toContain("Deleted repository alice/confirm-me.")
    expect((await grove(["repo", "show", "alice/confirm-me"], alice)).code).toBe(1)
  })

  it("a rejected key, no credential for a write, and no server are exit 6", async () => {
    const rejected = await grove(["repo", "list", "--json"], { ...alice, env: { ...alice.env, SERVICE_API_KEY: "grove_revoked-or-made-up" } })
    expect(rejected.code).toBe(6)
    expect(json(rejected)).toMatchObject({ status: 401 })

    const anonymous = await grove(["repo", "create", "nope", "--remote", server.url], { home: tempDir("nobody") })
    expect(anonymous.code).toBe(6)
    expect(anonymous.stderr).toContain("run grove login")

    const port = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as net.AddressInfo
        probe.close(() => resolve(port))
      })
    })
    const offline = await grove(["repo", "list", "--json", "--remote", `http://127.0.0.1:${port}`], alice)
    expect(offline.code).toBe(6)
    expect(json(offline)).toMatchObject({ code: "network" })
  })
})
