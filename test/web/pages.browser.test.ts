/**
 * The web interface in a real browser (headless Debian Chromium through playwright-core) against a
 * real server: signing in and out, the repository page the Oak client's `open` sends people to
 * (README rendered and sanitized, the tree, a highlighted file, raw), the branch page at its
 * percent-encoded address (description, the diff, a read receipt), merging (a conflict shown with
 * its path, then a clean merge), Close and Reopen, and a private repository answering the same 404
 * page as a missing one. Every page is screenshotted at 1280 and 390 px (into .tmp/test-output/web),
 * checked for its visible text, for no horizontal overflow, and by axe-core for zero serious or
 * critical findings; no page may log a CSP violation or a script error.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Browser, Page } from "playwright-core"
import { expectPageChecks, launchBrowser, outputFolder, pageOpener, signInAs, skipWithoutChromium } from "../support/browser.ts"
import { buildCommit, type Built, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const skip = skipWithoutChromium("test/web/pages.browser.test.ts")
const ALICE_PASSWORD = "alice-password-1"
const BOB_PASSWORD = "bob-password-1"

let server: GroveServer
let browser: Browser
let aliceKey: string
let bobKey: string
let folder: string
/** The squash commit that merged `other` onto main (a.txt "one" -> "three from other"). */
let otherMerge: string
const pages = pageOpener(() => browser)

const a = () => api(server.url, aliceKey)

const push = async (repo: string, branch: string, commits: ReadonlyArray<Built>, description?: string) => {
  const reply = await a().post(`/alice/${repo}/push`, pushBody({ branch, commits, ...(description === undefined ? {} : { description }) }))
  expect(reply.body, JSON.stringify(reply.body)).toMatchObject({ success: true })
}

const README = "# Hello Grove\n\nA *test* repository.\n\n<script>window.injected = 1</script>\n\n[bad](javascript:alert(1))\n"
const MAIN_TS = "export const greet = (name: string): string => {\n  return `hello ${name}`\n}\n"

/** alice/hello (public): README, src/main.ts, a.txt on main; branches feature/x (clean) and clash (conflicts with main). */
const seed = async () => {
  expect((await a().post("/repos", { name: "hello", is_public: true })).status).toBe(201)
  const setup = buildCommit({ branch: "setup", files: { "README.md": README, "src/main.ts": MAIN_TS, "a.txt": "one\n" }, parentHash: null, parentSnapshot: new Map() })
  await push("hello", "setup", [setup], "Initial files")
  const merged = await a().post("/alice/hello/branches/setup/merge")
  expect(merged.status, JSON.stringify(merged.body)).toBe(200)
  const main = { head: merged.body.commit_hash as string, snapshot: setup.snapshot }
  const feature = buildCommit({
    branch: "feature/x",
    files: { "README.md": README, "src/main.ts": MAIN_TS.replace("hello", "hi there"), "a.txt": "one\n", "src/new.ts": "export const added = 1\n" },
    parentHash: main.head,
    parentSnapshot: main.snapshot
  })
  await push("hello", "feature/x", [feature], "Greet more warmly\n\nAnd add new.ts.")
  const clash = buildCommit({ branch: "clash", files: { "README.md": README, "src/main.ts": MAIN_TS, "a.txt": "two from clash\n" }, parentHash: main.head, parentSnapshot: main.snapshot })
  await push("hello", "clash", [clash], "Change a.txt one way")
  const other = buildCommit({ branch: "other", files: { "README.md": README, "src/main.ts": MAIN_TS, "a.txt": "three from other\n" }, parentHash: main.head, parentSnapshot: main.snapshot })
  await push("hello", "other", [other], "Change a.txt another way")
  const otherMerged = await a().post("/alice/hello/branches/other/merge")
  expect(otherMerged.status).toBe(200)
  otherMerge = otherMerged.body.commit_hash
  // alice/guarded (public): secret/ is readable by alice only; branch `leak` changes a secret file and the README.
  expect((await a().post("/repos", { name: "guarded", is_public: true })).status).toBe(201)
  const guardedFiles = { "README.md": "guarded\n", "secret/key.txt": "the key\n", ".oak/PERMISSIONS": "/secret/ @alice\n" }
  const guarded = buildCommit({ branch: "setup", files: guardedFiles, parentHash: null, parentSnapshot: new Map() })
  const guardedPush = await a().post("/alice/guarded/push", pushBody({ branch: "setup", commits: [guarded], description: "Guarded files" }))
  expect(guardedPush.body, JSON.stringify(guardedPush.body)).toMatchObject({ success: true })
  const guardedMerge = await a().post("/alice/guarded/branches/setup/merge")
  expect(guardedMerge.status).toBe(200)
  const leak = buildCommit({
    branch: "leak",
    files: { ...guardedFiles, "README.md": "guarded, changed\n", "secret/key.txt": "the new key\n" },
    parentHash: guardedMerge.body.commit_hash,
    parentSnapshot: guarded.snapshot
  })
  const leakPush = await a().post("/alice/guarded/push", pushBody({ branch: "leak", commits: [leak], description: "Rotate the key" }))
  expect(leakPush.body, JSON.stringify(leakPush.body)).toMatchObject({ success: true })
  // A private repository bob may not see.
  expect((await a().post("/repos", { name: "secret" })).status).toBe(201)
}

describe.skipIf(skip)("web pages in headless Chromium", () => {
  beforeAll(async () => {
    folder = outputFolder("web")
    ;[server, browser] = await Promise.all([startServer(), launchBrowser()])
    aliceKey = await server.createUser("alice", { password: ALICE_PASSWORD })
    bobKey = await server.createUser("bob", { password: BOB_PASSWORD })
    await seed()
  }, 300_000)

  afterAll(async () => {
    await pages.closeAll()
    await server?.stop()
  })

  const newPage = pages.open

  /** Screenshots, visible text, no overflow and no serious axe finding at both widths. */
  const check = (page: Page, name: string, expected: string) => expectPageChecks(page, folder, name, expected)

  const signIn = (page: Page, user: string, password: string) => signInAs(page, server.url, user, password)

  it("signs in with an HttpOnly SameSite=Lax session cookie, shows the home page, and signs out (the session ends)", async () => {
    const { context, page, watch } = await newPage()
    const signedOut = await page.goto(`${server.url}/`)
    expect(signedOut?.status()).toBe(200)
    await check(page, "home-signed-out", "Sign in")
    await page.getByRole("link", { name: "Sign in" }).first().click()
    await check(page, "signin", "Sign in to Grove")
    // A wrong password stays on the form with an alert.
    await page.getByLabel("User name").fill("alice")
    await page.getByLabel("Password").fill("wrong-password")
    await page.getByRole("button", { name: "Sign in" }).click()
    await expect(page.getByRole("alert").textContent()).resolves.toContain("Wrong user name or password")

    await signIn(page, "alice", ALICE_PASSWORD)
    const cookie = (await context.cookies()).find((c) => c.name === "grove_session")!
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Lax", path: "/" })
    await check(page, "home-signed-in", "Welcome, alice")
    expect(await page.getByRole("link", { name: "alice/hello" }).count()).toBe(1)

    await Promise.all([page.waitForURL(`${server.url}/`), page.getByRole("button", { name: "Sign out" }).click()])
    expect((await context.cookies()).find((c) => c.name === "grove_session")).toBeUndefined()
    // The session itself ended: the old cookie's token no longer works anywhere.
    expect((await api(server.url, cookie.value).get("/whoami")).status).toBe(401)
    expect(await page.getByRole("link", { name: "Sign in" }).count()).toBeGreaterThan(0)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("shows the repository page at {site_url}/{owner}/{repo}: README sanitized, tree, file highlighted, raw", async () => {
    const { page, watch } = await newPage()
    const response = await page.goto(`${server.url}/alice/hello`)
    expect(response?.status()).toBe(200)
    const headers = response!.headers()
    expect(headers["content-security-policy"]).toContain("script-src 'self'")
    expect(headers["content-security-policy"]).not.toContain("unsafe-inline")
    expect(headers["x-frame-options"]).toBe("DENY")
    expect(headers["x-content-type-options"]).toBe("nosniff")
    expect(headers["cache-control"]).toContain("private")
    await check(page, "repository", "Hello Grove")
    expect(await page.locator(".markdown h1").textContent()).toBe("Hello Grove")
    expect(await page.locator(".markdown script").count()).toBe(0)
    expect(await page.evaluate("window.injected")).toBeUndefined()
    expect(await page.locator(".markdown a[href^='javascript']").count()).toBe(0)
    await expect(page.getByText(`git clone ${server.url}/alice/hello.git`).count()).resolves.toBe(1)
    await expect(page.getByText("grove clone alice/hello").count()).resolves.toBe(1)

    await page.getByRole("link", { name: "src/" }).click()
    await check(page, "tree", "main.ts")
    await page.getByRole("link", { name: "main.ts" }).click()
    await check(page, "file", "greet")
    expect(await page.locator("pre.hljs .hljs-keyword").count()).toBeGreaterThan(0)
    const raw = await page.request.get(await page.getByRole("link", { name: "Raw" }).getAttribute("href").then((href) => `${server.url}${href}`))
    expect(await raw.text()).toBe(MAIN_TS)
    expect(raw.headers()["content-security-policy"]).toBe("sandbox")

    // A client asking for JSON at the same address gets the API's answer.
    const json = await fetch(`${server.url}/alice/hello`, { headers: { accept: "application/json" } })
    expect(json.headers.get("content-type")).toContain("application/json")
    expect(await json.json()).toMatchObject({ full_name: "alice/hello", visibility: "public" })
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("shows a branch at its percent-encoded address with its diff, and records a read receipt", async () => {
    const { page, watch } = await newPage()
    await signIn(page, "alice", ALICE_PASSWORD)
    const response = await page.goto(`${server.url}/alice/hello/branches/feature%2Fx`)
    expect(response?.status()).toBe(200)
    await check(page, "branch", "Greet more warmly")
    const added = page.locator("table.diff tr.add")
    expect(await added.count()).toBeGreaterThan(0)
    await expect(added.filter({ hasText: "hi there" }).count()).resolves.toBe(1)
    await expect(page.getByText("src/new.ts").count()).resolves.toBeGreaterThan(0)
    // The receipt: bob, reading with record_read=1 through the API, sees that alice read it.
    const seen = await api(server.url, bobKey).get("/alice/hello/branches/feature%2Fx?record_read=1")
    expect(seen.body.readers.map((r: { name: string }) => r.name)).toContain("alice")
    // JSON at the same address for a client that asks for it.
    const json = await fetch(`${server.url}/alice/hello/branches/feature%2Fx`, { headers: { accept: "application/json" } })
    expect(await json.json()).toMatchObject({ name: "feature/x", status: "open", description: "Greet more warmly\n\nAnd add new.ts." })

    await page.goto(`${server.url}/alice/hello/branches`)
    await check(page, "branches", "feature/x")
    await expect(page.locator("tr", { hasText: "clash" }).getByText("conflicts").count()).resolves.toBe(1)
    await expect(page.locator("tr", { hasText: "feature/x" }).getByText("merges cleanly").count()).resolves.toBe(1)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("merges: a conflict is shown with its path, a clean branch merges; Close and Reopen", async () => {
    const { page, watch } = await newPage()
    await signIn(page, "alice", ALICE_PASSWORD)
    // With the session cookie but without the form's CSRF token, nothing happens.
    const forged = await page.request.post(`${server.url}/alice/hello/branches/clash/close`, { form: { csrf: "forged" }, maxRedirects: 0 })
    expect(forged.status()).toBe(403)
    expect((await a().get("/alice/hello/branches/clash")).body.status).toBe("open")
    await page.goto(`${server.url}/alice/hello/branches/clash`)
    await page.getByRole("button", { name: "Merge into main" }).click()
    const alert = page.getByRole("alert")
    await alert.waitFor({ timeout: 30_000 })
    await expect(alert.textContent()).resolves.toContain("Conflicts with main.")
    await expect(alert.locator("li").allTextContents()).resolves.toEqual(["a.txt"])
    await check(page, "merge-conflict", "a.txt")
    expect((await a().get("/alice/hello/branches/clash")).body.status).toBe("open")

    await page.getByRole("button", { name: "Close" }).click()
    await page.getByRole("button", { name: "Reopen" }).waitFor({ timeout: 30_000 })
    expect((await a().get("/alice/hello/branches/clash")).body.status).toBe("closed")
    await page.getByRole("button", { name: "Reopen" }).click()
    await page.getByRole("button", { name: "Close" }).waitFor({ timeout: 30_000 })
    expect((await a().get("/alice/hello/branches/clash")).body.status).toBe("open")

    const before = (await a().get("/alice/hello")).body.head
    await page.goto(`${server.url}/alice/hello/branches/feature%2Fx`)
    await page.getByRole("button", { name: "Merge into main" }).click()
    await page.locator(".meta .badge", { hasText: "merged" }).waitFor({ timeout: 30_000 })
    const after = (await a().get("/alice/hello")).body
    expect(after.head).not.toBe(before)
    expect((await a().get("/alice/hello/branches/feature%2Fx")).body.state).toBe("merged")
    await check(page, "merged", "merged")
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 180_000)

  it("shows main's history and a commit's diff, and reverts the commit", async () => {
    const { page, watch } = await newPage()
    await signIn(page, "alice", ALICE_PASSWORD)
    await page.goto(`${server.url}/alice/hello/commits`)
    await check(page, "commits", "Change a.txt another way")
    await page.getByRole("link", { name: otherMerge.slice(0, 10) }).click()
    await check(page, "commit", "three from other")
    await expect(page.locator("table.diff tr.add", { hasText: "three from other" }).count()).resolves.toBe(1)
    await page.getByRole("button", { name: "Revert" }).click()
    await page.locator("h2", { hasText: "Revert" }).waitFor({ timeout: 30_000 })
    const raw = await fetch(`${server.url}/api/alice/hello/raw/main/a.txt`, { headers: { authorization: `Bearer ${aliceKey}` } })
    expect(await raw.text()).toBe("one\n")
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("creates an API key shown once, which works, and revokes it", async () => {
    const { page, watch } = await newPage()
    await signIn(page, "bob", BOB_PASSWORD)
    await page.goto(`${server.url}/-/settings/keys`)
    await check(page, "keys", "New key")
    await page.getByLabel("Name").fill("browser-made")
    await page.getByRole("button", { name: "Create key" }).click()
    const shown = (await page.locator("#new-key").textContent())!
    expect(shown).toMatch(/^grove_[0-9A-Za-z]{20,}$/)
    expect(await page.locator("#new-key").count()).toBe(1)
    await check(page, "key-created", "not shown again")
    expect((await api(server.url, shown).get("/whoami")).body).toMatchObject({ name: "bob" })
    // Shown once: the list shows its prefix only.
    await page.goto(`${server.url}/-/settings/keys`)
    expect(await page.locator("main").innerText()).not.toContain(shown)
    await Promise.all([page.waitForURL(`${server.url}/-/settings/keys`), page.getByRole("button", { name: "Revoke browser-made" }).click()])
    expect(await page.getByRole("button", { name: "Revoke browser-made" }).count()).toBe(0)
    expect((await api(server.url, shown).get("/whoami")).status).toBe(401)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("never shows a withheld file: not in a tree, a diff, a file page or raw", async () => {
    const { page, watch } = await newPage()
    await signIn(page, "bob", BOB_PASSWORD)
    await page.goto(`${server.url}/alice/guarded/tree/main/secret`)
    await check(page, "withheld-tree", "Name")
    expect(await page.getByRole("link", { name: "key.txt" }).count()).toBe(0)
    expect((await page.goto(`${server.url}/alice/guarded/blob/main/secret/key.txt`))?.status()).toBe(404)
    expect((await page.request.get(`${server.url}/alice/guarded/raw/main/secret/key.txt`)).status()).toBe(404)
    await page.goto(`${server.url}/alice/guarded/branches/leak`)
    await check(page, "withheld-diff", "README.md")
    const text = await page.locator("main").innerText()
    expect(text).toContain("guarded, changed")
    expect(text).not.toContain("key.txt")
    expect(text).not.toContain("the new key")
    // alice, who may read it, sees it in the same diff.
    const { page: owner } = await newPage()
    await signIn(owner, "alice", ALICE_PASSWORD)
    await owner.goto(`${server.url}/alice/guarded/branches/leak`)
    expect(await owner.locator("main").innerText()).toContain("the new key")
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("answers a private repository with the same 404 page as a missing one", async () => {
    const { page, watch } = await newPage()
    await signIn(page, "bob", BOB_PASSWORD)
    const hidden = await page.goto(`${server.url}/alice/secret`)
    expect(hidden?.status()).toBe(404)
    const hiddenText = await page.locator("main").innerText()
    await check(page, "not-found", "Not found")
    const missing = await page.goto(`${server.url}/alice/no-such-repository`)
    expect(missing?.status()).toBe(404)
    expect(await page.locator("main").innerText()).toBe(hiddenText)
    expect(hiddenText).not.toContain("secret")
    // alice sees it.
    const { page: owner } = await newPage()
    await signIn(owner, "alice", ALICE_PASSWORD)
    expect((await owner.goto(`${server.url}/alice/secret`))?.status()).toBe(200)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)
})
