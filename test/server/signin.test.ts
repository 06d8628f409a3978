/**
 * Sign-in for the command-line client and the admin commands, end to end on
 * the real binary: the sign-in page (form posts as a browser sends them), the
 * loopback redirect, the headless one-time code, passwords, and user creation
 * with and without a running server.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer

/** The sign-in form's CSRF pair: the cookie the page sets and the token its hidden field repeats. */
const formToken = async (site: GroveServer = server) => {
  const page = await fetch(`${site.url}/cli-auth`)
  const cookie = page.headers.get("set-cookie")!.split(";")[0]!
  const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!
  return { cookie, csrf }
}

/**
 * Posts the sign-in form as a browser does after loading the page: with the page's CSRF cookie and
 * token and the server's own Origin, from `address` (any 127.x address reaches the server).
 */
const postForm = async (
  fields: Record<string, string>,
  options: { address?: string; origin?: string | null; csrf?: "none" | "no-cookie" | "mismatch"; forwardedFor?: string; site?: GroveServer } = {}
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> => {
  const site = options.site ?? server
  const { cookie, csrf } = await formToken(site)
  const body = new URLSearchParams({
    ...fields,
    ...(options.csrf === "none" ? {} : { csrf: options.csrf === "mismatch" ? (await formToken(site)).csrf : csrf })
  }).toString()
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" }
  if (options.csrf !== "no-cookie") headers["cookie"] = cookie
  const origin = options.origin === undefined ? site.url : options.origin
  if (origin !== null) headers["origin"] = origin
  if (options.forwardedFor !== undefined) headers["x-forwarded-for"] = options.forwardedFor
  const url = new URL(`${site.url}/cli-auth`)
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers, localAddress: options.address ?? "127.0.0.1" },
      (response) => {
        let text = ""
        response.on("data", (d: Buffer) => (text += d.toString()))
        response.on("end", () => resolve({ status: response.statusCode!, headers: response.headers, text }))
      }
    )
    request.on("error", reject)
    request.end(body)
  })
}

beforeAll(async () => {
  server = await startServer()
  await server.createUser("carol", { password: "carol-password-1" })
}, 300_000)

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

  it("redirects to the loopback callback with a one-time code and the state, never the token", async () => {
    const wrong = await postForm({ username: "carol", password: "nope", callback: "http://127.0.0.1:5555/cb", state: "state-123456" })
    expect(wrong.status).toBe(401)
    expect(wrong.headers.location).toBeUndefined()
    const ok = await postForm({ username: "carol", password: "carol-password-1", callback: "http://127.0.0.1:5555/cb", state: "state-123456" })
    expect(ok.status).toBe(303)
    const location = new URL(ok.headers.location!)
    expect(location.origin + location.pathname).toBe("http://127.0.0.1:5555/cb")
    expect(location.searchParams.get("state")).toBe("state-123456")
    // The address lands in the browser's history: it carries no session token.
    expect(location.searchParams.get("token")).toBeNull()
    expect(location.toString()).not.toContain("grove_")
    const code = location.searchParams.get("code")!
    const anon = api(server.url)
    const exchanged = await anon.post("/cli-auth/exchange", { code })
    expect(exchanged.status).toBe(200)
    expect(exchanged.body.username).toBe("carol")
    const me = await api(server.url, exchanged.body.token).get("/whoami")
    expect(me.status).toBe(200)
    expect(me.body).toMatchObject({ name: "carol", token: { kind: "session" } })
    const expires = Date.parse(me.body.token.expires_at) - Date.now()
    expect(expires).toBeGreaterThan(89 * 24 * 3600 * 1000)
    expect(expires).toBeLessThanOrEqual(90 * 24 * 3600 * 1000)
    expect((await anon.post("/cli-auth/exchange", { code })).status).toBe(404)
  })

  it("gives a one-time code for headless sign-in, usable once", async () => {
    const page = await postForm({ username: "carol", password: "carol-password-1", callback: "", state: "" })
    expect(page.status).toBe(200)
    const code = /id="code">([0-9A-Z-]+)</.exec(page.text)![1]!
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

  it("slows down password guessing per user name and address, and the owner still signs in from theirs", async () => {
    await server.createUser("dave", { password: "dave-password-1" })
    const attacker = { address: "127.0.0.2" }
    let refused: Awaited<ReturnType<typeof postForm>> | undefined
    for (let i = 0; i < 10 && refused === undefined; i++) {
      const guess = await postForm({ username: "dave", password: `guess-${i}`, callback: "", state: "" }, attacker)
      if (guess.status === 429) refused = guess
      else expect(guess.status).toBe(401)
    }
    // A few free failures, then a delay that grows with every further failure.
    expect(refused?.status).toBe(429)
    expect(Number(refused!.headers["retry-after"])).toBeGreaterThanOrEqual(1)
    // The owner, from another address, is not locked out.
    const owner = await postForm({ username: "dave", password: "dave-password-1", callback: "", state: "" }, { address: "127.0.0.3" })
    expect(owner.status).toBe(200)
    expect(owner.text).toContain("id=\"code\"")
    // Other names from the attacker's address are still answered.
    expect((await postForm({ username: "carol", password: "nope", callback: "", state: "" }, attacker)).status).toBe(401)
  })

  it("counts the address a trusted proxy names (--trusted-proxies), and ignores X-Forwarded-For from anyone else", async () => {
    // Not trusted here: a forged header does not give each guess a fresh address.
    await server.createUser("gina", { password: "gina-password-1" })
    const statuses: Array<number> = []
    for (let i = 0; i < 10 && !statuses.includes(429); i++) {
      statuses.push((await postForm({ username: "gina", password: `guess-${i}`, callback: "", state: "" }, { address: "127.0.0.7", forwardedFor: `203.0.113.${i + 1}` })).status)
    }
    expect(statuses).toContain(429)

    const proxied = await startServer({ args: ["--trusted-proxies", "127.0.0.0/8"] })
    try {
      await proxied.createUser("hank", { password: "hank-password-1" })
      const viaProxy = (forwardedFor: string, password: string) =>
        postForm({ username: "hank", password, callback: "", state: "" }, { site: proxied, forwardedFor })
      let refused = false
      for (let i = 0; i < 10 && !refused; i++) refused = (await viaProxy("203.0.113.66", `guess-${i}`)).status === 429
      expect(refused).toBe(true)
      // The same proxy, another client: the owner signs in.
      expect((await viaProxy("198.51.100.7", "hank-password-1")).status).toBe(200)
    } finally {
      await proxied.stop()
    }
  }, 120_000)

  it("refuses a form without this page's CSRF token or from another origin (login CSRF)", async () => {
    const fields = { username: "carol", password: "carol-password-1", callback: "", state: "" }
    const address = { address: "127.0.0.4" }
    for (const csrf of ["none", "no-cookie", "mismatch"] as const) {
      const forged = await postForm(fields, { ...address, csrf })
      expect(forged.status, csrf).toBe(403)
      expect(forged.text).not.toContain("id=\"code\"")
    }
    for (const origin of ["https://evil.example", "null"]) {
      expect((await postForm(fields, { ...address, origin })).status, origin).toBe(403)
    }
    expect((await postForm(fields, { ...address, origin: null })).status).toBe(200)
    expect((await postForm(fields, address)).status).toBe(200)
    // The token lives in an HttpOnly, SameSite=Strict cookie.
    const page = await fetch(`${server.url}/cli-auth`)
    expect(page.headers.get("set-cookie")).toMatch(/^grove_signin=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict/)
  })

  it("every HTML page sends a CSP, X-Frame-Options: DENY and nosniff; JSON sends nosniff", async () => {
    for (const address of ["/", "/cli-auth", "/cli-auth?callback=http%3A%2F%2Fevil.example%3A1%2F&state=abcdefgh12"]) {
      const r = await fetch(`${server.url}${address}`)
      expect(r.headers.get("content-type"), address).toContain("text/html")
      expect(r.headers.get("content-security-policy"), address).toContain("default-src 'none'")
      expect(r.headers.get("content-security-policy"), address).toContain("frame-ancestors 'none'")
      expect(r.headers.get("x-frame-options"), address).toBe("DENY")
      expect(r.headers.get("x-content-type-options"), address).toBe("nosniff")
    }
    const signIn = await postForm({ username: "carol", password: "nope", callback: "", state: "" }, { address: "127.0.0.5" })
    expect(signIn.headers["content-security-policy"]).toContain("default-src 'none'")
    expect(signIn.headers["x-content-type-options"]).toBe("nosniff")
    for (const address of ["/api/whoami", "/api/openapi.json", "/api/no-such-thing", "/no-such-page"]) {
      const r = await fetch(`${server.url}${address}`)
      expect(r.headers.get("content-type"), address).toContain("application/json")
      expect(r.headers.get("x-content-type-options"), address).toBe("nosniff")
    }
  })
})

describe("admin commands", () => {
  it("sets a password through the running server's admin socket", async () => {
    const key = await server.createUser("erin")
    expect(key).toMatch(/^grove_/)
    const set = await run(SERVER_BIN, ["user", "passwd", "erin", "--data-dir", server.dataDir], { input: "erin-password-1\n" })
    expect(set.code).toBe(0)
    expect(set.stdout).toContain(`Through the server using the data directory ${path.resolve(server.dataDir)}.`)
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
    expect(created.stdout).toMatch(new RegExp(`^No server is using the data directory ${path.resolve(dataDir)}: opened it directly\\.\n`))
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
