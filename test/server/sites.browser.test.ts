/**
 * An organization site in headless Chromium (Debian's chromium through playwright-core): a signed-in
 * visitor opens the site by path, on the service's own origin, and the site's script tries to read
 * the service's cookies and to read a service page with the visitor's session. The CSP sandbox gives
 * the page an opaque origin, so both fail; the same probe run on the service's own page succeeds, so
 * the probe itself works. Screenshots go to .tmp/test-output/sites/ (printed).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Browser } from "playwright-core"
import * as path from "node:path"
import { buildCommit, pushBody } from "../support/content.ts"
import { launchBrowser, outputFolder, skipWithoutChromium } from "../support/browser.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const skip = skipWithoutChromium("sites.browser.test.ts")
const PASSWORD = "alice-password-1"

/** Reads `document.cookie` and fetches `/` with the visitor's cookies; the outcome ends up in #out. */
const PROBE = `(() => {
  const out = []
  try { out.push("cookie:" + document.cookie) } catch (e) { out.push("cookie-blocked:" + e.name) }
  return fetch("/", { credentials: "include" })
    .then((r) => r.text())
    .then((t) => out.push(t.includes(">alice<") ? "page:read-as-alice" : "page:anonymous"), (e) => out.push("page-blocked:" + e.name))
    .then(() => { document.getElementById("out").textContent = out.join("\\n"); return out })
})()`

const SITE = `<!doctype html><html lang="en"><title>Acme site</title><h1>Acme's site</h1>
<p>This page tries to read the service's cookies and a service page as the visitor:</p><pre id="out">running</pre>
<script>window.probe = ${PROBE}</script></html>\n`

let server: GroveServer
let browser: Browser

describe.skipIf(skip)("a site in Chromium", () => {
  beforeAll(async () => {
    ;[server, browser] = await Promise.all([startServer(), launchBrowser()])
    const a = api(server.url, await server.createUser("alice", { password: PASSWORD }))
    expect((await a.post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
    expect((await a.post("/repos", { name: "www", organization_slug: "acme", is_public: true })).status).toBe(201)
    const c = buildCommit({ branch: "setup", files: { "index.html": SITE } })
    expect((await a.post("/acme/www/push", pushBody({ branch: "setup", commits: [c], description: "Site" }))).body.success).toBe(true)
    expect((await a.post("/acme/www/branches/setup/merge")).status).toBe(200)
    expect((await a.put("/orgs/acme/site", { repo: "www" })).status).toBe(200)
  }, 300_000)

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
  })

  it("cannot read the service's cookies or read the service as the signed-in visitor", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    try {
      const page = await context.newPage()
      await page.goto(`${server.url}/-/signin`)
      await page.getByLabel("User name").fill("alice")
      await page.getByLabel("Password").fill(PASSWORD)
      await Promise.all([page.waitForURL(`${server.url}/`), page.getByRole("button", { name: "Sign in" }).click()])
      // A cookie scripts could read, were they on the service's origin.
      await context.addCookies([{ name: "probe", value: "readable", url: server.url }])
      // The probe works where it runs as the service: it reads the cookie and the page as alice.
      const control = await page.evaluate(`(() => { document.body.insertAdjacentHTML("beforeend", "<pre id=out></pre>"); return ${PROBE} })()`)
      expect(control).toEqual(["cookie:probe=readable", "page:read-as-alice"])

      const response = await page.goto(`${server.url}/sites/acme/`)
      expect(response?.headers()["content-security-policy"]).toMatch(/^sandbox /)
      await page.waitForFunction(`document.getElementById("out").textContent !== "running"`, undefined, { timeout: 30_000 })
      const outcome = (await page.textContent("#out"))!.split("\n")
      expect(outcome).toEqual(["cookie-blocked:SecurityError", "page-blocked:TypeError"])
      expect(await page.evaluate("origin")).toBe("null")
      const file = path.join(outputFolder("sites"), "site-sandboxed.png")
      await page.screenshot({ path: file, fullPage: true })
      console.log(`sites.browser.test.ts: screenshot ${file}; the site page saw: ${outcome.join(", ")}`)
    } finally {
      await context.close()
    }
  })
})
