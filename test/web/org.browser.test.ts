/**
 * The organization pages in headless Chromium against a real server: an owner creates an
 * organization from the page, adds a member and changes the role, creates a group and adds to it,
 * creates a service account and a key (shown once, gone on the next visit; it works against the API),
 * revokes it (then 401), and turns the site on and off. A member gets read-only pages (no forms, no
 * admin tabs; the settings page is refused), and a non-member the same 404 page as for a missing
 * organization. Every page is screenshotted at 1280 and 390 px into .tmp/test-output/web-org and
 * checked for its text, overflow and axe's serious or critical findings; no CSP violation or script error.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { expectPageChecks, launchBrowser, outputFolder, signInAs, skipWithoutChromium, watchPage } from "../support/browser.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const skip = skipWithoutChromium("test/web/org.browser.test.ts")
const PASSWORD = "org-test-password-1"

let server: GroveServer
let browser: Browser
let aliceKey: string
let folder: string
const contexts: Array<BrowserContext> = []
const watches: Array<{ readonly violations: Array<string>; readonly errors: Array<string> }> = []

const a = () => api(server.url, aliceKey)

describe.skipIf(skip)("organization pages in headless Chromium", () => {
  beforeAll(async () => {
    folder = outputFolder("web-org")
    ;[server, browser] = await Promise.all([startServer(), launchBrowser()])
    aliceKey = await server.createUser("alice", { password: PASSWORD })
    for (const user of ["bob", "carol", "dave"]) await server.createUser(user, { password: PASSWORD })
    await server.createUser("root", { password: PASSWORD, admin: true })
  }, 300_000)

  afterAll(async () => {
    for (const context of contexts) await context.close().catch(() => undefined)
    await browser?.close()
    await server?.stop()
  })

  /** A signed-in page of its own browser context. */
  const pageOf = async (user: string): Promise<Page> => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    contexts.push(context)
    const page = await context.newPage()
    watches.push(await watchPage(page))
    await signInAs(page, server.url, user, PASSWORD)
    return page
  }

  /** Clicks a form's button and waits for the page the 303 leads to. */
  const submit = async (page: Page, button: string, to: string) => {
    await Promise.all([page.waitForURL(`${server.url}${to}`), page.getByRole("button", { name: button, exact: true }).click()])
  }

  const org = (rest = "") => `/-/orgs/acme${rest}`
  let alice: Page

  it("an owner creates an organization from its page and sees its overview", async () => {
    alice = await pageOf("alice")
    await Promise.all([alice.waitForURL(`${server.url}/-/orgs`), alice.getByRole("link", { name: "Organizations" }).click()])
    await expectPageChecks(alice, folder, "orgs", "New organization")
    await alice.getByLabel("Short name (in addresses)").fill("acme")
    await alice.getByLabel("Name", { exact: true }).fill("Acme Corp")
    await submit(alice, "Create organization", org())
    // Repositories made after the page: a public one and a private one, through the API.
    expect((await a().post("/repos", { name: "site", is_public: true, organization_slug: "acme" })).status).toBe(201)
    expect((await a().post("/repos", { name: "widgets", organization_slug: "acme" })).status).toBe(201)
    await alice.reload()
    const main = await alice.locator("main").innerText()
    expect(main).toContain("Acme Corp")
    expect(main).toContain("You: owner")
    expect(main).toMatch(/used of/)
    expect(main).toContain("Site: Off")
    expect(await alice.getByRole("link", { name: "widgets" }).count()).toBe(1)
    expect(await alice.getByRole("navigation", { name: "Organization" }).innerText()).toContain("Settings")
    await expectPageChecks(alice, folder, "org-overview", "Repositories")
  })

  it("adds a member, changes the role, and shows the API's refusal of an unknown user", async () => {
    await alice.goto(`${server.url}${org("/members")}`)
    await alice.getByLabel("User name").fill("bob")
    await submit(alice, "Add member", org("/members"))
    expect((await a().get("/orgs/acme/members")).body.members).toContainEqual(expect.objectContaining({ username: "bob", role: "member" }))
    await alice.getByLabel("Role of bob", { exact: true }).selectOption("admin")
    await submit(alice, "Change the role of bob", org("/members"))
    expect((await a().get("/orgs/acme/members")).body.members).toContainEqual(expect.objectContaining({ username: "bob", role: "admin" }))
    await alice.getByLabel("Role of bob", { exact: true }).selectOption("member")
    await submit(alice, "Change the role of bob", org("/members"))
    expect((await a().get("/orgs/acme/members")).body.members).toContainEqual(expect.objectContaining({ username: "bob", role: "member" }))
    await alice.getByLabel("User name").fill("dave")
    await submit(alice, "Add member", org("/members"))
    // A refusal: the API's words on the page, with its status.
    await alice.getByLabel("User name").fill("nobody-here")
    const [refused] = await Promise.all([alice.waitForResponse((r) => r.request().method() === "POST"), alice.getByRole("button", { name: "Add member" }).click()])
    expect(refused.status()).toBe(404)
    await alice.waitForLoadState()
    expect(await alice.getByRole("alert").innerText()).toMatch(/nobody-here|not found/i)
    await alice.goto(`${server.url}${org("/members")}`)
    await expectPageChecks(alice, folder, "org-members", "Add a member")
  })

  it("creates a group and adds a member to it", async () => {
    await alice.goto(`${server.url}${org("/groups")}`)
    expect(await alice.locator("main").innerText()).toContain("No groups yet.")
    await alice.getByLabel("Short name").fill("reviewers")
    await alice.getByLabel("Description").fill("Read every branch")
    await submit(alice, "Create group", org("/groups"))
    await alice.getByLabel("User name to add to reviewers").fill("bob")
    await submit(alice, "Add to reviewers", org("/groups"))
    const groups = (await a().get("/orgs/acme/groups")).body.groups
    expect(groups).toEqual([expect.objectContaining({ slug: "reviewers", description: "Read every branch", members: ["bob"] })])
    expect(await alice.getByRole("region", { name: "reviewers" }).innerText()).toContain("bob")
    await expectPageChecks(alice, folder, "org-groups", "Read every branch")
  })

  it("creates a service account and a key shown once; the key works until it is revoked", async () => {
    await alice.goto(`${server.url}${org("/service-accounts")}`)
    await alice.getByLabel("Short name").fill("ci-bot")
    await alice.getByLabel("Display name").fill("CI bot")
    await submit(alice, "Create service account", org("/service-accounts/ci-bot"))
    await alice.getByLabel("Name", { exact: true }).fill("deploy")
    await alice.getByLabel("write", { exact: true }).check()
    const [created] = await Promise.all([
      alice.waitForResponse((r) => r.request().method() === "POST" && r.url().endsWith("/keys")),
      alice.getByRole("button", { name: "Create key" }).click()
    ])
    expect(created.status()).toBe(201)
    expect(created.headers()["cache-control"]).toBe("no-store")
    await alice.waitForLoadState()
    const key = (await alice.locator("#new-key").textContent())!.trim()
    expect(key.length).toBeGreaterThan(20)
    await expectPageChecks(alice, folder, "org-key-created", "not shown again")
    // The key acts as the account: it reads the organization's private repository.
    const asKey = api(server.url, key)
    expect((await asKey.get("/acme/widgets")).status).toBe(200)
    // Gone on the next visit: only its prefix is listed.
    await alice.goto(`${server.url}${org("/service-accounts/ci-bot")}`)
    expect(await alice.locator("#new-key").count()).toBe(0)
    expect(await alice.content()).not.toContain(key)
    const row = await alice.getByRole("row", { name: /deploy/ }).innerText()
    expect(row).toContain("read, write")
    await expectPageChecks(alice, folder, "org-service-account", "New key")
    await submit(alice, "Revoke deploy", org("/service-accounts/ci-bot"))
    expect(await alice.getByRole("row", { name: /deploy/ }).count()).toBe(0)
    expect((await asKey.get("/acme/widgets")).status).toBe(401)
    await alice.goto(`${server.url}${org("/service-accounts")}`)
    expect(await alice.getByRole("link", { name: "ci-bot" }).count()).toBe(1)
    await expectPageChecks(alice, folder, "org-service-accounts", "CI bot")
  })

  it("turns the site on and off from the settings page", async () => {
    await alice.goto(`${server.url}${org("/settings")}`)
    await alice.getByLabel("Repository").selectOption("site")
    await submit(alice, "Turn the site on", org("/settings"))
    expect((await a().get("/orgs/acme/site")).body).toMatchObject({ repo_name: "site" })
    await expectPageChecks(alice, folder, "org-settings", "Turn the site off")
    await alice.goto(`${server.url}${org()}`)
    expect(await alice.locator("main").innerText()).toContain("Site: On")
    await alice.goto(`${server.url}${org("/settings")}`)
    await submit(alice, "Turn the site off", org("/settings"))
    expect((await a().get("/orgs/acme/site")).status).toBe(404)
    expect(await alice.locator("main").innerText()).toContain("Site: Off")
  })

  it("lets only an instance admin set the quota", async () => {
    await alice.goto(`${server.url}${org("/settings")}`)
    expect(await alice.locator("main").innerText()).toContain("Only an instance admin changes the quota.")
    expect(await alice.getByLabel("Quota in MiB").count()).toBe(0)
    const root = await pageOf("root")
    await root.goto(`${server.url}${org("/settings")}`)
    expect(await root.locator("main").innerText()).toContain("You: instance admin")
    await root.getByLabel("Quota in MiB").fill("20")
    await submit(root, "Set quota", org("/settings"))
    expect((await a().get("/orgs/acme/storage")).body).toMatchObject({ quota_bytes: 20 * 1024 * 1024 })
    expect(await root.locator("main").innerText()).toContain("of 20 MiB")
    await root.getByLabel("Quota in MiB").fill("lots")
    const [refused] = await Promise.all([root.waitForResponse((r) => r.request().method() === "POST"), root.getByRole("button", { name: "Set quota" }).click()])
    expect(refused.status()).toBe(400)
    await root.waitForLoadState()
    expect(await root.getByRole("alert").count()).toBe(1)
  })

  it("gives a member read-only pages and a non-member the 404 page", async () => {
    const dave = await pageOf("dave")
    await dave.goto(`${server.url}${org("/members")}`)
    const tabs = await dave.getByRole("navigation", { name: "Organization" }).innerText()
    expect(tabs).toContain("Service accounts")
    expect(tabs).not.toContain("Settings")
    expect(await dave.locator("form[action*='/members']").count()).toBe(0)
    expect(await dave.locator("main").innerText()).toContain("Owners and admins manage the members.")
    await expectPageChecks(dave, folder, "org-members-readonly", "bob")
    expect((await dave.goto(`${server.url}${org("/settings")}`))?.status()).toBe(403)
    expect((await dave.goto(`${server.url}${org("/service-accounts/ci-bot")}`))?.status()).toBe(403)

    const carol = await pageOf("carol")
    const missing = await carol.goto(`${server.url}/-/orgs/no-such-org`)
    expect(missing?.status()).toBe(404)
    const missingText = await carol.locator("main").innerText()
    for (const path of ["", "/members", "/groups", "/service-accounts", "/service-accounts/ci-bot", "/settings"]) {
      const answer = await carol.goto(`${server.url}${org(path)}`)
      expect(answer?.status(), path).toBe(404)
      expect(await carol.locator("main").innerText(), path).toBe(missingText)
    }
    await expectPageChecks(carol, folder, "org-not-found", "Not found")
    // Signed out: the same 404 page (with a sign-in link), and a sign-in page for "your organizations".
    const anonymous = await (await browser.newContext()).newPage()
    contexts.push(anonymous.context())
    expect((await anonymous.goto(`${server.url}${org()}`))?.status()).toBe(404)
    expect(await anonymous.locator("main").innerText()).toContain("Sign in")
    expect((await anonymous.goto(`${server.url}/-/orgs`))?.status()).toBe(401)

    // A write the page did not offer, with a valid form token: the API decides (member 403, non-member 404).
    const forge = async (page: Page) => {
      await page.goto(`${server.url}/-/settings/keys`)
      const csrf = (await page.locator("input[name=csrf]").first().getAttribute("value"))!
      return page.request.post(`${server.url}${org("/members")}`, { form: { csrf, username: "carol", role: "owner" }, headers: { origin: server.url } })
    }
    const byMember = await forge(dave)
    expect(byMember.status()).toBe(403)
    expect(await byMember.text()).toContain("admin")
    expect((await forge(carol)).status()).toBe(404)
    expect((await a().get("/orgs/acme/members")).body.members.map((m: { username: string }) => m.username)).toEqual(["alice", "bob", "dave"])
    for (const watch of watches) {
      expect(watch.violations).toEqual([])
      expect(watch.errors).toEqual([])
    }
  })
})
