/**
 * An organization's webhooks, CI secrets and audit log pages in headless Chromium against a real
 * server (embedded): an admin adds a webhook pointing at a receiver this test runs on 127.0.0.1
 * (allowed by `--webhook-allow`), pushes, sees the delivery in the hook's log and redelivers it; sets
 * a CI secret and sees only its name; filters and pages the audit log; a plain member gets the API's
 * 403 and no forms, a non-member the 404 page. axe-core and screenshots at both widths, as the other
 * browser suites do.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Browser } from "playwright-core"
import { expectPageChecks, launchBrowser, outputFolder, pageOpener, signInAs, skipWithoutChromium } from "../support/browser.ts"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"
import { type Receiver, startReceiver } from "../support/WebhookReceiver.ts"

const skip = skipWithoutChromium("test/web/org-admin.browser.test.ts")
const PASSWORD = (user: string) => `${user}-password-1`
const HOOK_SECRET = "hook-s3cret-never-shown"
const CI_SECRET = "ci-v4lue-never-shown"
/** Audit entries written before the test, so the log has more than one page (50) of them. */
const BULK = 53

let server: GroveServer
let receiver: Receiver
let browser: Browser
let folder: string
const tokens: Record<string, string> = {}
const pages = pageOpener(() => browser)
const as = (user: string) => api(server.url, tokens[user])

describe.skipIf(skip)("organization webhooks, CI secrets and audit log pages", () => {
  beforeAll(async () => {
    folder = outputFolder("web-org-admin")
    ;[server, browser, receiver] = await Promise.all([startServer({ args: ["--webhook-allow", "127.0.0.1/32"] }), launchBrowser(), startReceiver()])
    for (const user of ["alice", "mel", "nora"]) tokens[user] = await server.createUser(user, { password: PASSWORD(user) })
    expect((await as("alice").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
    expect((await as("alice").post("/orgs/acme/members", { username: "mel", role: "member" })).status).toBe(201)
    expect((await as("alice").post("/repos", { name: "app", organization_slug: "acme" })).status).toBe(201)
    expect((await as("mel").post("/repos", { name: "mels", organization_slug: "acme" })).status).toBe(201)
    for (let i = 0; i < BULK; i++) expect((await as("alice").put("/acme/mels/ci/secrets", { name: "BULK", value: `v${i}` })).status).toBe(200)
  }, 300_000)

  afterAll(async () => {
    await pages.closeAll()
    await server?.stop()
    await receiver?.close()
  })

  const signedIn = async (user: string) => {
    const { page, watch } = await pages.open()
    await signInAs(page, server.url, user, PASSWORD(user))
    return { page, watch }
  }

  it("adds a webhook, shows its delivery after a push, redelivers it, and deletes the hook; the secret is never shown", async () => {
    const { page, watch } = await signedIn("alice")
    await page.goto(`${server.url}/-/orgs/acme/webhooks`)
    await expectPageChecks(page, folder, "webhooks-empty", "Add a webhook")
    const url = `http://127.0.0.1:${receiver.port}/hook`
    await page.getByLabel("Repository").selectOption("app")
    await page.getByLabel("Payload URL").fill(url)
    await page.getByLabel("branch.created").check()
    await page.getByLabel("Secret (optional)").fill(HOOK_SECRET)
    await Promise.all([page.waitForURL(`${server.url}/-/orgs/acme/webhooks`), page.getByRole("button", { name: "Add webhook" }).click()])
    const hooks = (await as("alice").get("/acme/app/webhooks")).body.webhooks
    expect(hooks).toHaveLength(1)
    expect(hooks[0]).toMatchObject({ url, events: ["branch.created"], has_secret: true, created_by: "alice" })
    expect(await page.content()).not.toContain(HOOK_SECRET)
    await expectPageChecks(page, folder, "webhooks", url)

    // A URL the egress rules refuse: the API's 400 is shown on the page, nothing is added.
    await page.getByLabel("Repository").selectOption("app")
    await page.getByLabel("Payload URL").fill("http://10.1.2.3/internal")
    await page.getByRole("button", { name: "Add webhook" }).click()
    await expect(page.getByRole("alert").textContent()).resolves.toContain("not allowed")
    expect((await as("alice").get("/acme/app/webhooks")).body.webhooks).toHaveLength(1)

    // An event: a new branch in app.
    const commit = buildCommit({ branch: "feature", files: { "a.txt": "one\n" }, parentHash: null, parentSnapshot: new Map() })
    expect((await as("alice").post("/acme/app/push", pushBody({ branch: "feature", commits: [commit], description: "A push" }))).body).toMatchObject({ success: true })
    await waitFor("the delivery", async () => receiver.received.some((r) => r.path === "/hook") || undefined)

    await page.goto(`${server.url}/-/orgs/acme/webhooks`)
    await page.getByRole("link", { name: `Deliveries of ${url}` }).click()
    const row = page.locator("table.deliveries tbody tr")
    await waitFor("the delivery row to show it succeeded", async () => {
      await page.reload()
      return (await row.first().textContent())?.includes("succeeded") || undefined
    })
    expect(await row.count()).toBe(1)
    const cells = await row.first().locator("td").allTextContents()
    expect(cells[1]).toBe("branch.created")
    expect(cells[3]).toBe("1") // attempts
    expect(cells[4]).toBe("204") // the receiver's answer
    expect(cells[5]).toMatch(/^\d+ ms$/)
    expect(await page.content()).not.toContain(HOOK_SECRET)
    await expectPageChecks(page, folder, "webhook-deliveries", "succeeded")

    // Redeliver: a second delivery of the same body.
    const before = receiver.received.filter((r) => r.path === "/hook").length
    await page.getByRole("button", { name: /^Redeliver the branch.created delivery/ }).click()
    await waitFor("the redelivery", async () => receiver.received.filter((r) => r.path === "/hook").length > before || undefined)
    const [first, second] = receiver.received.filter((r) => r.path === "/hook")
    expect(second!.raw.equals(first!.raw)).toBe(true)
    await waitFor("two delivery rows", async () => {
      await page.reload()
      return (await row.count()) === 2 && (await row.first().textContent())?.includes("succeeded") ? true : undefined
    })
    expect(await row.first().textContent()).toContain("redelivery")

    await page.goto(`${server.url}/-/orgs/acme/webhooks`)
    await Promise.all([page.waitForURL(`${server.url}/-/orgs/acme/webhooks`), page.getByRole("button", { name: `Delete the webhook ${url}` }).click()])
    expect((await as("alice").get("/acme/app/webhooks")).body.webhooks).toEqual([])
    await expect(page.getByRole("link", { name: `Deliveries of ${url}` }).count()).resolves.toBe(0)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 240_000)

  it("sets a CI secret and shows only its name; deletes it", async () => {
    const { page, watch } = await signedIn("alice")
    await page.goto(`${server.url}/-/orgs/acme/secrets`)
    await page.getByLabel("Repository").selectOption("app")
    await page.getByLabel("Name", { exact: true }).fill("DEPLOY_TOKEN")
    await page.getByLabel("Value", { exact: true }).fill(CI_SECRET)
    await Promise.all([page.waitForURL(`${server.url}/-/orgs/acme/secrets`), page.getByRole("button", { name: "Set secret" }).click()])
    expect((await as("alice").get("/acme/app/ci/secrets")).body.secrets.map((s: { name: string }) => s.name)).toEqual(["DEPLOY_TOKEN"])
    const app = page.locator("section", { has: page.getByRole("heading", { name: "acme/app" }) })
    await expect(app.locator("td.mono").allTextContents()).resolves.toEqual(["DEPLOY_TOKEN"])
    expect(await page.content()).not.toContain(CI_SECRET)
    expect(await page.getByLabel("Value", { exact: true }).inputValue()).toBe("")
    await expectPageChecks(page, folder, "ci-secrets", "DEPLOY_TOKEN")

    // A name the API refuses: its 400 on the page.
    await page.getByLabel("Repository").selectOption("app")
    await page.getByLabel("Name", { exact: true }).fill("GROVE_MINE")
    await page.getByLabel("Value", { exact: true }).fill("x")
    await page.getByRole("button", { name: "Set secret" }).click()
    await expect(page.getByRole("alert").textContent()).resolves.toContain("reserved")

    await Promise.all([page.waitForURL(`${server.url}/-/orgs/acme/secrets`), page.getByRole("button", { name: "Delete DEPLOY_TOKEN of app" }).click()])
    expect((await as("alice").get("/acme/app/ci/secrets")).body.secrets).toEqual([])
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("filters the audit log by actor, action and time, and pages through it", async () => {
    const { page, watch } = await signedIn("alice")
    await page.goto(`${server.url}/-/orgs/acme/audit`)
    await expectPageChecks(page, folder, "audit", "ci.secret.set")
    const actions = page.locator("table.audit tbody tr td:nth-child(3)")
    const actors = page.locator("table.audit tbody tr td:nth-child(2)")

    await page.getByLabel("Actor", { exact: true }).fill("mel")
    await Promise.all([page.waitForURL(/actor=mel/), page.getByRole("button", { name: "Filter" }).click()])
    const melsApi = (await as("alice").get("/orgs/acme/audit?actor=mel")).body.entries.map((e: { action: string }) => e.action)
    expect(melsApi).toEqual(["repo.create"])
    await expect(actors.allTextContents()).resolves.toEqual(["mel"])
    await expect(actions.allTextContents()).resolves.toEqual(melsApi)
    await expectPageChecks(page, folder, "audit-filtered", "repo.create")

    // By action, over two pages of 50: every entry once, newest first, as the API lists them.
    await page.goto(`${server.url}/-/orgs/acme/audit`)
    await page.getByLabel("Action", { exact: true }).fill("ci.secret.set")
    await Promise.all([page.waitForURL(/action=ci.secret.set/), page.getByRole("button", { name: "Filter" }).click()])
    const all = (await as("alice").get("/orgs/acme/audit?action=ci.secret.set")).body.entries as Array<{ created_at: string }>
    expect(all.length).toBeGreaterThan(50)
    await expect(actions.allTextContents()).resolves.toEqual(Array(50).fill("ci.secret.set"))
    await Promise.all([page.waitForURL(/cursor=/), page.getByRole("link", { name: "Older entries" }).click()])
    await expect(actions.allTextContents()).resolves.toEqual(Array(all.length - 50).fill("ci.secret.set"))
    expect(await page.getByRole("link", { name: "Older entries" }).count()).toBe(0)
    await expect(page.getByLabel("Action", { exact: true }).inputValue()).resolves.toBe("ci.secret.set")

    // Since a time after every entry: none. A malformed time: a clear 400 on the page, not a 500.
    const future = new Date(Date.now() + 3_600_000).toISOString().slice(0, 16)
    await page.goto(`${server.url}/-/orgs/acme/audit?since=${future}`)
    await expect(page.getByText("No entries match these filters.").count()).resolves.toBe(1)
    const bad = await page.goto(`${server.url}/-/orgs/acme/audit?since=yesterday`)
    expect(bad?.status()).toBe(400)
    await expect(page.getByRole("alert").textContent()).resolves.toContain("Since must be a date and time")
    expect((await page.goto(`${server.url}/-/orgs/acme/audit?cursor=not-one`))?.status()).toBe(400)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("a plain member gets the API's 403 and no forms; a non-member the 404 page", async () => {
    const { page: member, watch } = await signedIn("mel")
    for (const tab of ["webhooks", "secrets", "audit"]) {
      const answer = await member.goto(`${server.url}/-/orgs/acme/${tab}`)
      expect(answer?.status(), tab).toBe(403)
      expect(await member.locator("main form").count(), tab).toBe(0)
      expect(await member.locator("main").innerText(), tab).not.toContain("BULK")
    }
    await expectPageChecks(member, folder, "org-admin-member", "Not allowed")
    // The org's own pages do not offer the tabs to a member.
    await member.goto(`${server.url}/-/orgs/acme`)
    expect(await member.getByRole("navigation", { name: "Organization" }).getByRole("link", { name: "Audit log" }).count()).toBe(0)
    // A post without the page's CSRF token does nothing.
    const forged = await member.request.post(`${server.url}/-/orgs/acme/secrets`, { form: { csrf: "x", repo: "app", name: "X", value: "y" }, maxRedirects: 0 })
    expect(forged.status()).toBe(403)

    const { page: stranger } = await signedIn("nora")
    for (const tab of ["webhooks", "secrets", "audit", "webhooks/app/00000000-0000-4000-8000-000000000000"]) {
      const answer = await stranger.goto(`${server.url}/-/orgs/acme/${tab}`)
      expect(answer?.status(), tab).toBe(404)
      expect(await stranger.locator("main").innerText()).toContain("Not found")
    }
    expect((await stranger.goto(`${server.url}/-/orgs/no-such-org/audit`))?.status()).toBe(404)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)
})
