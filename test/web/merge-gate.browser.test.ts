/**
 * The CI merge gate on the branch page, in headless Chromium against a real server whose native CI
 * runs the repository's workflow: a branch whose run failed answers Merge with the API's 412, shown
 * on the page with a Force button; an organization admin forces it and the branch merges (the audit
 * log records the override); a plain member, who may not merge, gets the API's refusal and no Force.
 * (A conflict's 409 with its paths is covered by pages.browser.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Browser } from "playwright-core"
import { expectPageChecks, launchBrowser, outputFolder, pageOpener, signInAs, skipWithoutChromium } from "../support/browser.ts"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

const skip = skipWithoutChromium("test/web/merge-gate.browser.test.ts")
const PASSWORD = (user: string) => `${user}-password-1`

let server: GroveServer
let browser: Browser
let folder: string
const tokens: Record<string, string> = {}
const pages = pageOpener(() => browser)
const as = (user: string) => api(server.url, tokens[user])

/** Every event runs it (no `on`); it fails when the commit has broken.txt. */
const WORKFLOW = ["jobs:", "  check:", "    steps:", "      - run: test ! -f broken.txt"].join("\n")

/** The newest run of `branch` once it completed. */
const finishedRun = (branch: string) =>
  waitFor(`CI run of ${branch}`, async () => {
    const runs = (await as("alice").get("/acme/gated/ci/runs")).body as Array<{ branch: string; status: string; conclusion: string | null }>
    const run = runs.find((r) => r.branch === branch)
    return run?.status === "completed" ? run : undefined
  }, 180_000)

describe.skipIf(skip)("the CI merge gate on the branch page", () => {
  beforeAll(async () => {
    folder = outputFolder("web-merge-gate")
    ;[server, browser] = await Promise.all([startServer(), launchBrowser()])
    for (const user of ["alice", "adam", "mel"]) tokens[user] = await server.createUser(user, { password: PASSWORD(user) })
    expect((await as("alice").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
    expect((await as("alice").post("/orgs/acme/members", { username: "adam", role: "admin" })).status).toBe(201)
    expect((await as("alice").post("/orgs/acme/members", { username: "mel", role: "member" })).status).toBe(201)
    expect((await as("alice").post("/repos", { name: "gated", organization_slug: "acme" })).status).toBe(201)
    const files = { ".oak/workflows/check.yml": WORKFLOW, "app.txt": "v1\n" }
    const setup = buildCommit({ branch: "setup", files, parentHash: null, parentSnapshot: new Map() })
    expect((await as("alice").post("/acme/gated/push", pushBody({ branch: "setup", commits: [setup], description: "Set up" }))).body).toMatchObject({ success: true })
    // The set-up merge does not wait for its own run.
    const merged = await as("alice").post("/acme/gated/branches/setup/merge?force=1")
    expect(merged.status, JSON.stringify(merged.body)).toBe(200)
    const broken = buildCommit({
      branch: "broken",
      files: { ...files, "app.txt": "v2\n", "broken.txt": "x\n" },
      parentHash: merged.body.commit_hash,
      parentSnapshot: setup.snapshot
    })
    expect((await as("alice").post("/acme/gated/push", pushBody({ branch: "broken", commits: [broken], description: "Break the check" }))).body)
      .toMatchObject({ success: true })
    expect(await finishedRun("broken")).toMatchObject({ conclusion: "failure" })
  }, 300_000)

  afterAll(async () => {
    await pages.closeAll()
    await server?.stop()
  })

  const signedIn = async (user: string) => {
    const { page, watch } = await pages.open()
    await signInAs(page, server.url, user, PASSWORD(user))
    return { page, watch }
  }

  it("a plain member gets the API's refusal and no Force option; nothing merges", async () => {
    const { page, watch } = await signedIn("mel")
    await page.goto(`${server.url}/acme/gated/branches/broken`)
    await expect(page.locator(".meta .badge", { hasText: "CI failing" }).count()).resolves.toBe(1)
    await page.getByRole("button", { name: "Merge into main" }).click()
    const alert = page.getByRole("alert")
    await alert.waitFor({ timeout: 30_000 })
    await expect(alert.textContent()).resolves.toMatch(/admin/i)
    expect(await page.getByRole("button", { name: /force/i }).count()).toBe(0)
    await expectPageChecks(page, folder, "merge-refused-member", "Not done.")
    expect((await as("alice").get("/acme/gated/branches/broken")).body.status).toBe("open")
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("an admin sees the 412 with Force, forces it, and the branch merges (audited as forced)", async () => {
    const { page, watch } = await signedIn("adam")
    await page.goto(`${server.url}/acme/gated/branches/broken`)
    await page.getByRole("button", { name: "Merge into main" }).click()
    const alert = page.getByRole("alert")
    await alert.waitFor({ timeout: 30_000 })
    await expect(alert.textContent()).resolves.toContain("CI does not allow this merge yet.")
    await expect(alert.textContent()).resolves.toContain("check")
    const force = page.getByRole("button", { name: "Merge anyway (force)" })
    expect(await force.count()).toBe(1)
    await expectPageChecks(page, folder, "merge-gate-412", "CI does not allow this merge yet.")
    expect((await as("alice").get("/acme/gated/branches/broken")).body.status).toBe("open")

    const before = (await as("alice").get("/acme/gated")).body.head
    await force.click()
    await page.locator(".meta .badge", { hasText: "merged" }).waitFor({ timeout: 30_000 })
    expect((await as("alice").get("/acme/gated/branches/broken")).body.state).toBe("merged")
    expect((await as("alice").get("/acme/gated")).body.head).not.toBe(before)
    const raw = await fetch(`${server.url}/api/acme/gated/raw/main/app.txt`, { headers: { authorization: `Bearer ${tokens["alice"]}` } })
    expect(await raw.text()).toBe("v2\n")
    const audit = await as("alice").get("/orgs/acme/audit?action=branch.merge.forced")
    expect(audit.body.entries.map((e: { actor: string; details: { branch?: string } }) => [e.actor, e.details.branch])).toContainEqual(["adam", "broken"])
    await expectPageChecks(page, folder, "merge-gate-forced", "merged")
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 180_000)
})
