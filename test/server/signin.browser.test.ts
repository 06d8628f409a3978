/**
 * The sign-in page of `grove login` in a real browser: headless Chromium (Debian's `chromium`,
 * driven by playwright-core) opens the address `grove login` prints, with a loopback callback
 * this test listens on, types the user name and password and submits. The page must render and
 * work under its own Content-Security-Policy; a wrong password shows an error on the page.
 *
 * Skipped, with a message, only when no Chromium binary is installed
 * (scripts/setup/system-deps.sh installs it). GROVE_CHROMIUM names another binary;
 * GROVE_KEEP_SCREENSHOTS=1 keeps the screenshots (their folder is printed).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import type { Browser, BrowserContext } from "playwright-core"
import { launchBrowser, skipWithoutChromium, watchPage } from "../support/browser.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const skipped = skipWithoutChromium("signin.browser.test.ts")

const PASSWORD = "erin-password-1"

/** The loopback half of `grove login`: records every request to /callback. */
interface Loopback {
  readonly callbackUrl: string
  readonly received: Array<URL>
  readonly close: () => Promise<void>
}

const startLoopback = (): Promise<Loopback> =>
  new Promise((resolve, reject) => {
    const received: Array<URL> = []
    const server = http.createServer((request, response) => {
      const url = new URL(request.url ?? "/", "http://127.0.0.1")
      if (url.pathname === "/callback") received.push(url)
      response.writeHead(url.pathname === "/callback" ? 200 : 404, {
        "content-type": "text/html; charset=utf-8",
        "content-security-policy": "default-src 'none'",
        connection: "close"
      })
      response.end("<!doctype html><title>Signed in</title><p>Sign-in received.</p>")
    })
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        callbackUrl: `http://127.0.0.1:${port}/callback`,
        received,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done())
            server.closeAllConnections()
          })
      })
    })
  })

let server: GroveServer
let loopback: Loopback
let browser: Browser
let context: BrowserContext
let shots: string

describe.skipIf(skipped)("sign-in page in headless Chromium", () => {
  beforeAll(async () => {
    shots = fs.mkdtempSync(path.join(os.tmpdir(), "grove-signin-shots-"))
    ;[server, loopback, browser] = await Promise.all([
      startServer().then(async (started) => {
        await started.createUser("erin", { password: PASSWORD })
        return started
      }),
      startLoopback(),
      launchBrowser()
    ])
    context = await browser.newContext({ viewport: { width: 800, height: 600 } })
  }, 120_000)

  afterAll(async () => {
    await browser?.close()
    await loopback?.close()
    await server?.stop()
    if (process.env["GROVE_KEEP_SCREENSHOTS"] === "1") console.log(`sign-in screenshots kept in ${shots}`)
    else if (shots !== undefined) fs.rmSync(shots, { recursive: true, force: true })
  })

  /** The address `grove login` prints and opens: its loopback callback and a fresh 32-character state. */
  const signInAddress = () => {
    const state = randomBytes(24).toString("base64url")
    return { state, url: `${server.url}/cli-auth?callback=${encodeURIComponent(loopback.callbackUrl)}&state=${state}` }
  }

  it("signs in: lands on the loopback callback with a one-time code and the state, and the code gives a session", async () => {
    const page = await context.newPage()
    const csp = await watchPage(page)
    const { state, url } = signInAddress()
    const shown = await page.goto(url)
    expect(shown?.status()).toBe(200)
    expect(shown?.headers()["content-security-policy"]).toContain("default-src 'none'")
    // The page's styles apply under its CSP: the button has the padding Html.ts gives it.
    expect(await page.evaluate("getComputedStyle(document.querySelector('button[type=submit]')).paddingLeft")).toBe("19.2px")
    await expect(page.title()).resolves.toBe("Sign in · Grove")
    const screenshot = path.join(shots, "signin.png")
    await page.screenshot({ path: screenshot, fullPage: true })
    expect(fs.statSync(screenshot).size).toBeGreaterThan(1000)

    await page.getByLabel("User name").fill("erin")
    await page.getByLabel("Password").fill(PASSWORD)
    await Promise.all([
      page.waitForURL((address) => address.toString().startsWith(loopback.callbackUrl), { timeout: 15_000 }),
      page.getByRole("button", { name: "Sign in" }).click()
    ])
    await page.screenshot({ path: path.join(shots, "callback.png") })

    const landed = new URL(page.url())
    expect(landed.origin + landed.pathname).toBe(loopback.callbackUrl)
    expect(landed.searchParams.get("state")).toBe(state)
    const code = landed.searchParams.get("code")!
    expect(code).toMatch(/^[0-9A-Za-z-]{10,16}$/)
    // The address stays in the browser's history: it carries no session token.
    expect(landed.searchParams.get("token")).toBeNull()
    expect(page.url()).not.toContain("grove_")
    expect(loopback.received.map((received) => received.searchParams.get("code"))).toEqual([code])

    const exchanged = await api(server.url).post("/cli-auth/exchange", { code })
    expect(exchanged.status).toBe(200)
    expect(exchanged.body.username).toBe("erin")
    expect(page.url()).not.toContain(exchanged.body.token)
    const me = await api(server.url, exchanged.body.token).get("/whoami")
    expect(me.status).toBe(200)
    expect(me.body).toMatchObject({ name: "erin", token: { kind: "session" } })

    expect(csp.violations).toEqual([])
    expect(csp.errors).toEqual([])
    await page.close()
  }, 30_000)

  it("shows an error on the page for a wrong password, and sends nothing to the callback", async () => {
    const page = await context.newPage()
    const csp = await watchPage(page)
    const before = loopback.received.length
    const { url } = signInAddress()
    await page.goto(url)
    await page.getByLabel("User name").fill("erin")
    await page.getByLabel("Password").fill("not-her-password")
    const [answer] = await Promise.all([
      page.waitForResponse((response) => response.request().method() === "POST"),
      page.getByRole("button", { name: "Sign in" }).click()
    ])
    expect(answer.status()).toBe(401)
    await page.waitForLoadState()
    await expect(page.getByRole("alert").textContent()).resolves.toBe("Wrong user name or password.")
    expect(new URL(page.url()).origin).toBe(new URL(server.url).origin)
    // The form is back, the name kept and the password not.
    expect(await page.getByLabel("User name").inputValue()).toBe("erin")
    expect(await page.getByLabel("Password").inputValue()).toBe("")
    await page.screenshot({ path: path.join(shots, "wrong-password.png"), fullPage: true })
    expect(loopback.received.length).toBe(before)
    expect(csp.violations).toEqual([])
    await page.close()
  }, 30_000)
})
