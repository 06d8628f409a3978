/**
 * Issue 22's rough edges, with the real `grove` binary against a real server: the server a login
 * names is remembered (the default outside a checkout; --remote and GROVE_REMOTE override it).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { grove, json, ok, oneTimeCode, removeTempDirs, tempDir } from "./harness.ts"

let server: GroveServer
const PASSWORD = "ann-password-1"

beforeAll(async () => {
  server = await startServer({ dataDir: tempDir("data") })
  await server.createUser("ann", { password: PASSWORD, admin: true })
}, 120_000)

afterAll(async () => {
  await server?.stop()
  removeTempDirs()
})

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
