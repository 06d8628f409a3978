/**
 * `grove login`, `logout` and `auth status` end to end: the real client
 * binary against the real server, both login flows through the sign-in page,
 * and the credential order of the spec (SERVICE_API_KEY, the checkout's key,
 * the login session).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { grove, json, oneTimeCode, postSignIn, spawnGrove, startSuiteServer, stopSuiteServers, tempDir, writeCheckout } from "./harness.ts"

let server: GroveServer
let bobKey: string
let carolKey: string
const PASSWORD = "alice-password-1"

beforeAll(async () => {
  server = await startSuiteServer()
  await server.createUser("alice", { password: PASSWORD })
  bobKey = await server.createUser("bob")
  carolKey = await server.createUser("carol")
}, 300_000)

afterAll(stopSuiteServers)

/** A home with a login session of alice, made by a headless login. */
const signedInHome = async () => {
  const home = tempDir("home")
  const code = await oneTimeCode(server.url, "alice", PASSWORD)
  const login = await grove(["login", "--headless", "--remote", server.url], { home, input: `${code}\n` })
  expect(login.code, login.stderr).toBe(0)
  return home
}

describe("grove login --headless", () => {
  it("exchanges the one-time code from the sign-in page and stores the session 0600", async () => {
    const home = tempDir("home")
    const code = await oneTimeCode(server.url, "alice", PASSWORD)
    const login = await grove(["login", "--headless", "--remote", `${server.url}/`], { home, input: `${code}\n` })
    expect(login.code, login.stderr).toBe(0)
    expect(login.stderr).toContain(`${server.url}/cli-auth`)
    expect(login.stdout).toMatch(new RegExp(`^Signed in to ${server.url} as alice \\(the session expires \\d{4}-`))

    const file = path.join(home, ".grove", "credentials")
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
    expect(fs.statSync(path.join(home, ".grove")).mode & 0o777).toBe(0o700)
    const stored = JSON.parse(fs.readFileSync(file, "utf8"))
    expect(Object.keys(stored)).toEqual([server.url])
    expect(stored[server.url]).toMatchObject({ username: "alice", token: expect.stringMatching(/^grove_/) })

    const status = await grove(["auth", "status", "--json", "--remote", server.url], { home })
    expect(status.code, status.stderr).toBe(0)
    expect(json(status)).toMatchObject({
      remote: server.url,
      credential: { source: "session", location: file },
      whoami: { kind: "user", name: "alice", token: { kind: "session", expires_at: expect.any(String) } },
      passed: []
    })
  })

  it("a used or wrong code is refused with exit 6", async () => {
    const home = tempDir("home")
    const code = await oneTimeCode(server.url, "alice", PASSWORD)
    expect((await grove(["login", "--headless", "--remote", server.url], { home, input: `${code}\n` })).code).toBe(0)
    for (const input of [`${code}\n`, "not-a-code\n"]) {
      const again = await grove(["login", "--headless", "--json", "--remote", server.url], { home: tempDir("home"), input })
      expect(again.code).toBe(6)
      expect(json(again)).toMatchObject({ code: "invalid_code", error: expect.stringContaining("wrong, already used or expired") })
    }
    const none = await grove(["login", "--headless", "--remote", server.url], { home: tempDir("home"), input: "" })
    expect(none.code).toBe(6)
    expect(none.stderr).toContain("no one-time code given")
  })
})

describe("grove login (browser)", () => {
  it("receives a one-time code (never the token) on its loopback callback and exchanges it for the session", async () => {
    const home = tempDir("home")
    const login = spawnGrove(["login", "--json", "--remote", server.url], { home })
    const [address] = await login.waitForStderr(/http:\/\/\S+\/cli-auth\?\S+/)
    const url = new URL(address)
    expect(`${url.origin}${url.pathname}`).toBe(`${server.url}/cli-auth`)
    const callback = url.searchParams.get("callback")!
    const state = url.searchParams.get("state")!
    expect(callback).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/)
    expect(state).toMatch(/^[A-Za-z0-9_-]{32}$/)

    // The page the browser shows is the server's own sign-in form.
    expect(await (await fetch(address)).text()).toContain("name=\"password\"")

    // A sign-in carrying another state reaches the listener but is refused; the client keeps waiting.
    const forged = await postSignIn(server.url, { username: "alice", password: PASSWORD, callback, state: "x".repeat(32) })
    expect(forged.status).toBe(303)
    const refused = await fetch(forged.headers.get("location")!)
    expect(refused.status).toBe(400)
    expect(await refused.text()).toContain("does not belong")

    const signIn = await postSignIn(server.url, { username: "alice", password: PASSWORD, callback, state })
    expect(signIn.status).toBe(303)
    const location = signIn.headers.get("location")!
    expect(location.startsWith(`${callback}?`)).toBe(true)
    // The browser keeps this address in its history: no session token in it.
    expect(location).not.toContain("grove_")
    expect(new URL(location).searchParams.get("token")).toBeNull()
    expect(new URL(location).searchParams.get("code")).toMatch(/^[0-9A-Z]{5}-[0-9A-Z]{5}$/)
    const landing = await fetch(location)
    expect(landing.status).toBe(200)
    expect(await landing.text()).toContain("You can close this tab")

    const result = await login.done
    expect(result.code, result.stderr).toBe(0)
    expect(json(result)).toMatchObject({ remote: server.url, username: "alice", whoami: { name: "alice", token: { kind: "session" } } })

    const status = await grove(["auth", "status", "--json", "--remote", server.url], { home })
    expect(json(status)).toMatchObject({ credential: { source: "session" }, whoami: { name: "alice" } })
    // The code was used up by the client.
    const again = await fetch(`${server.url}/api/cli-auth/exchange`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ code: new URL(location).searchParams.get("code") })
    })
    expect(again.status).toBe(404)
  })
})

describe("grove auth status", () => {
  it("the login session when it is the only credential", async () => {
    const home = await signedInHome()
    const status = await grove(["auth", "status", "--remote", server.url], { home })
    expect(status.code, status.stderr).toBe(0)
    expect(status.stdout).toContain(`Credential:   the login session in ${path.join(home, ".grove", "credentials")}`)
    expect(status.stdout).toContain("Signed in as: user alice")
    expect(status.stdout).toContain("Token:        login session")
  })

  it("the checkout's key wins over the session when the checkout is bound to this server, and only then", async () => {
    const home = await signedInHome()
    const work = tempDir("work")
    writeCheckout(work, { remote: `${server.url}/`, key: carolKey })
    const deep = path.join(work, "src", "lib")
    fs.mkdirSync(deep, { recursive: true })
    const bound = await grove(["auth", "status", "--json", "--remote", server.url], { home, cwd: deep })
    expect(bound.code, bound.stderr).toBe(0)
    expect(json(bound)).toMatchObject({
      credential: { source: "checkout", location: path.join(work, ".grove", "config.json") },
      whoami: { name: "carol", token: { kind: "personal" } },
      passed: [{ source: "session", reason: expect.stringContaining("overridden by the key stored in the checkout") }]
    })

    const elsewhere = tempDir("work")
    writeCheckout(elsewhere, { remote: "http://127.0.0.1:9", key: carolKey })
    const unbound = await grove(["auth", "status", "--json", "--remote", server.url], { home, cwd: elsewhere })
    expect(json(unbound)).toMatchObject({
      credential: { source: "session" },
      whoami: { name: "alice" },
      passed: [{ source: "checkout", reason: "bound to http://127.0.0.1:9, not this server" }]
    })
  })

  it("SERVICE_API_KEY wins over everything", async () => {
    const home = await signedInHome()
    const work = tempDir("work")
    writeCheckout(work, { remote: server.url, key: carolKey })
    const status = await grove(["auth", "status", "--json", "--remote", server.url], { home, cwd: work, env: { SERVICE_API_KEY: bobKey } })
    expect(status.code, status.stderr).toBe(0)
    expect(json(status)).toMatchObject({
      credential: { source: "env", location: "SERVICE_API_KEY" },
      whoami: { name: "bob", token: { kind: "personal" } },
      passed: [{ source: "checkout" }, { source: "session" }]
    })
    const human = await grove(["auth", "status", "--remote", server.url], { home, cwd: work, env: { SERVICE_API_KEY: bobKey } })
    expect(human.stdout).toContain("Credential:   the SERVICE_API_KEY environment variable")
    expect(human.stdout).toContain("Not used:")
  })

  it("a rejected credential and no credential are exit 6", async () => {
    const rejected = await grove(["auth", "status", "--json", "--remote", server.url], {
      home: tempDir("home"),
      env: { SERVICE_API_KEY: "grove_not-a-real-key" }
    })
    expect(rejected.code).toBe(6)
    expect(json(rejected)).toMatchObject({
      error: expect.stringContaining(`${server.url} rejected the SERVICE_API_KEY environment variable`),
      credential: { source: "env" }
    })

    const none = await grove(["auth", "status", "--remote", server.url], { home: tempDir("home") })
    expect(none.code).toBe(6)
    expect(none.stdout).toBe("")
    expect(none.stderr).toContain(`no credential for ${server.url}`)
  })
})

describe("grove logout", () => {
  it("forgets the session for that server only", async () => {
    const home = await signedInHome()
    const logout = await grove(["logout", "--json", "--remote", server.url], { home })
    expect(logout.code).toBe(0)
    expect(json(logout)).toEqual({ remote: server.url, removed: true })
    expect((await grove(["auth", "status", "--remote", server.url], { home })).code).toBe(6)
    const again = await grove(["logout", "--remote", server.url], { home })
    expect(again.code).toBe(0)
    expect(again.stdout).toContain(`Not signed in to ${server.url}`)
  })
})
