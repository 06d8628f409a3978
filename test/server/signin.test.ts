/**
 * Sign-in for the command-line client and the admin commands, end to end on
 * the real binary: the sign-in page (form posts as a browser sends them), the
 * loopback redirect, the headless one-time code, passwords, and user creation
 * with and without a running server.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer

const postForm = (fields: Record<string, string>) =>
  fetch(`${server.url}/cli-auth`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(fields).toString()
  })

beforeAll(async () => {
  server = await startServer()
  await server.createUser("carol", { password: "carol-password-1" })
}, 120_000)

afterAll(async () => {
  await server?.stop()
})

describe("sign-in page", () => {
  it("shows a form, and refuses callbacks that are not loopback", async () => {
    const page = await fetch(`${server.url}/cli-auth?callback=${encodeURIComponent("http://127.0.0.1:5555/cb")}&state=abcdefgh12`)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toContain("text/html")
    expect(page.headers.get("cache-control")).toBe("no-store")
    const html = await page.text()
    expect(html).toContain("name=\"password\"")
    expect(html).toContain("abcdefgh12")
    for (const callback of ["http://evil.example:5555/cb", "https://127.0.0.1:5555/cb", "http://127.0.0.1/cb", "javascript:alert(1)"]) {
      const r = await fetch(`${server.url}/cli-auth?callback=${encodeURIComponent(callback)}&state=abcdefgh12`)
      expect(r.status, callback).toBe(400)
    }
    const injected = await fetch(`${server.url}/cli-auth?callback=&state=${encodeURIComponent("\"><script>")}`)
    expect(await injected.text()).not.toContain("<script>")
  })

  it("redirects to the loopback callback with token, username and state", async () => {
    const wrong = await postForm({ username: "carol", password: "nope", callback: "http://127.0.0.1:5555/cb", state: "state-123456" })
    expect(wrong.status).toBe(401)
    expect(wrong.headers.get("location")).toBeNull()
    const ok = await postForm({ username: "carol", password: "carol-password-1", callback: "http://127.0.0.1:5555/cb", state: "state-123456" })
    expect(ok.status).toBe(303)
    const location = new URL(ok.headers.get("location")!)
    expect(location.origin + location.pathname).toBe("http://127.0.0.1:5555/cb")
    expect(location.searchParams.get("state")).toBe("state-123456")
    expect(location.searchParams.get("username")).toBe("carol")
    const token = location.searchParams.get("token")!
    const me = await api(server.url, token).get("/whoami")
    expect(me.status).toBe(200)
    expect(me.body).toMatchObject({ name: "carol", token: { kind: "session" } })
    const expires = Date.parse(me.body.token.expires_at) - Date.now()
    expect(expires).toBeGreaterThan(89 * 24 * 3600 * 1000)
    expect(expires).toBeLessThanOrEqual(90 * 24 * 3600 * 1000)
  })

  it("gives a one-time code for headless sign-in, usable once", async () => {
    const page = await postForm({ username: "carol", password: "carol-password-1", callback: "", state: "" })
    expect(page.status).toBe(200)
    const code = /id="code">([0-9A-Z-]+)</.exec(await page.text())![1]!
    const anon = api(server.url)
    const exchanged = await anon.post("/cli-auth/exchange", { code: code.toLowerCase() })
    expect(exchanged.status).toBe(200)
    expect(exchanged.body.username).toBe("carol")
    expect((await api(server.url, exchanged.body.token).get("/whoami")).body.name).toBe("carol")
    const reused = await anon.post("/cli-auth/exchange", { code })
    expect(reused.status).toBe(404)
    expect(reused.body.code).toBe("invalid_code")
    expect((await anon.post("/cli-auth/exchange", { code: "AAAAA-AAAAA" })).status).toBe(404)
  })

  it("slows down password guessing", async () => {
    await server.createUser("dave", { password: "dave-password-1" })
    for (let i = 0; i < 10; i++) {
      expect((await postForm({ username: "dave", password: `guess-${i}`, callback: "", state: "" })).status).toBe(401)
    }
    expect((await postForm({ username: "dave", password: "dave-password-1", callback: "", state: "" })).status).toBe(429)
  })
})

describe("admin commands", () => {
  it("sets a password through the running server's admin socket", async () => {
    const key = await server.createUser("erin")
    expect(key).toMatch(/^grove_/)
    const set = await run(SERVER_BIN, ["user", "passwd", "erin", "--data-dir", server.dataDir], { input: "erin-password-1\n" })
    expect(set.code).toBe(0)
    expect((await postForm({ username: "erin", password: "erin-password-1", callback: "", state: "" })).status).toBe(200)
    const short = await run(SERVER_BIN, ["user", "passwd", "erin", "--data-dir", server.dataDir], { input: "short\n" })
    expect(short.code).toBe(1)
    const dup = await run(SERVER_BIN, ["user", "create", "erin", "--data-dir", server.dataDir])
    expect(dup.code).toBe(1)
    expect(dup.stderr).toContain("already taken")
    const bad = await run(SERVER_BIN, ["user", "create", "Bad Name", "--data-dir", server.dataDir])
    expect(bad.code).toBe(1)
    expect((await run(SERVER_BIN, ["user", "create"])).code).toBe(2)
  })

  it("creates users with no server running, and the server then knows them", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-offline-"))
    const created = await run(SERVER_BIN, ["user", "create", "frank", "--admin", "--data-dir", dataDir])
    expect(created.code).toBe(0)
    const key = created.stdout.trim().split("\n").pop()!
    expect(key).toMatch(/^grove_/)
    const offline = await startServer({ dataDir })
    try {
      const me = await api(offline.url, key).get("/whoami")
      expect(me.body).toMatchObject({ name: "frank", is_admin: true })
      // Only one process may open an embedded data directory.
      await expect(startServer({ dataDir })).rejects.toThrow(/exited/)
    } finally {
      await offline.stop()
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
