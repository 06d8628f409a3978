/**
 * The CI pages in a real browser (headless Debian Chromium through playwright-core) against a real
 * embedded server running real sandboxed steps: a run page follows a step's log live over server-sent
 * events while the step writes (the step waits for a marker file the test writes into its checkout,
 * then prints a line stamped with the time it printed it: the delay to the browser showing it is
 * measured), with ANSI colours as classes and the secret masked; a long log shows its last 1,000 lines
 * and links the whole raw log; Re-run and Cancel from the page; the runs per repository and per branch,
 * paginated, newest first; readers see no buttons; a private repository's CI pages are the same 404
 * page as a missing one's. Every page is screenshotted at 1280 and 390 px into .tmp/test-output/web-ci
 * and checked by axe-core for zero serious or critical findings; no page may log a CSP violation or a
 * script error.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Browser, Page } from "playwright-core"
import { expectPageChecks, launchBrowser, outputFolder, pageOpener, signInAs, skipWithoutChromium } from "../support/browser.ts"
import { LIVE_WORKFLOW, liveWorkdir, printedAt, releaseStep } from "../support/ciLive.ts"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

const skip = skipWithoutChromium("test/web/ci.browser.test.ts")
const ALICE_PASSWORD = "alice-password-1"
const BOB_PASSWORD = "bob-password-1"
const SECRET = "s3cr3t-Value-never-shown"

const WORKFLOWS: Record<string, string> = {
  // Prints, waits for the test's marker file in its checkout (5 minutes at most), then prints its clock.
  ".oak/workflows/live.yml": LIVE_WORKFLOW,
  ".oak/workflows/long.yml": ["on: [manual]", "jobs:", "  rows:", "    steps:", "      - run: seq 1 2500 | sed 's/^/row /'"].join("\n"),
  // Fails at once, before any sandbox: cheap runs for the list's pages.
  ".oak/workflows/broken.yml": ["on: [manual]", "jobs:", "  build:", "    stepz:", "      - run: x"].join("\n")
}

let server: GroveServer
let browser: Browser
let aliceKey: string
let folder: string
const pages = pageOpener(() => browser)
/** The live run, finished by the first test; re-run by the second, whose new run the third cancels. */
let liveRun: number
let rerun: number

const a = () => api(server.url, aliceKey)

const startRun = async (repo: string, workflow: string, branch = "main") => {
  const reply = await a().post(`/alice/${repo}/ci/runs`, { workflow, branch })
  expect(reply.status, JSON.stringify(reply.body)).toBe(201)
  return reply.body.run_ids[0] as number
}

const runOf = async (repo: string, id: number) => (await a().get(`/alice/${repo}/ci/runs/${id}`)).body

const completed = (repo: string, id: number) =>
  waitFor(`run ${id} to complete`, async () => {
    const run = await runOf(repo, id)
    return run.status === "completed" ? run : undefined
  }, 120_000)

/** The checkout of a live run, as its step printed it. */
const workdirOf = (id: number) => liveWorkdir(() => runOf("app", id))

/** A repository with the workflows on main (pushed on `setup`, merged). */
const seedRepo = async (name: string, isPublic: boolean) => {
  expect((await a().post("/repos", { name, is_public: isPublic })).status).toBe(201)
  const setup = buildCommit({ branch: "setup", files: { "README.md": `# ${name}\n`, ...WORKFLOWS }, parentHash: null, parentSnapshot: new Map() })
  const pushed = await a().post(`/alice/${name}/push`, pushBody({ branch: "setup", commits: [setup], description: "Workflows" }))
  expect(pushed.body, JSON.stringify(pushed.body)).toMatchObject({ success: true })
  const merged = await a().post(`/alice/${name}/branches/setup/merge?force=1`)
  expect(merged.status, JSON.stringify(merged.body)).toBe(200)
  return { head: merged.body.commit_hash as string, snapshot: setup.snapshot }
}

describe.skipIf(skip)("CI pages in headless Chromium", () => {
  beforeAll(async () => {
    folder = outputFolder("web-ci")
    ;[server, browser] = await Promise.all([startServer({ args: ["--ci-concurrency", "4"] }), launchBrowser()])
    aliceKey = await server.createUser("alice", { password: ALICE_PASSWORD })
    await server.createUser("bob", { password: BOB_PASSWORD })
    const main = await seedRepo("app", true)
    expect((await a().raw("PUT", "/alice/app/ci/secrets", { name: "API_TOKEN", value: SECRET })).status).toBe(200)
    // Branch `feature/ci` for the per-branch list.
    const feature = buildCommit({ branch: "feature/ci", files: { "README.md": "# app, changed\n", ...WORKFLOWS }, parentHash: main.head, parentSnapshot: main.snapshot })
    const pushed = await a().post("/alice/app/push", pushBody({ branch: "feature/ci", commits: [feature], description: "A feature" }))
    expect(pushed.body, JSON.stringify(pushed.body)).toMatchObject({ success: true })
    await seedRepo("hidden", false)
  }, 300_000)

  afterAll(async () => {
    await pages.closeAll()
    await server?.stop()
  })

  const newPage = pages.open

  const check = (page: Page, name: string, expected: string) => expectPageChecks(page, folder, name, expected)

  const signedIn = async (user: "alice" | "bob") => {
    const opened = await newPage()
    await signInAs(opened.page, server.url, user, user === "alice" ? ALICE_PASSWORD : BOB_PASSWORD)
    return opened
  }

  it("follows a step's log live while it writes: colours as classes, the secret masked, the later line shown without a reload", async () => {
    const { page, watch } = await signedIn("alice")
    liveRun = await startRun("app", "live")
    const workdir = await workdirOf(liveRun)
    // The page opens once the open colour is stored: its log ends inside it.
    await waitFor("the green start", async () => (JSON.stringify(await runOf("app", liveRun)).includes("green from before the wait") ? true : undefined))
    await page.goto(`${server.url}/alice/app/ci/runs/${liveRun}`)
    await page.getByText("token=***").waitFor({ timeout: 30_000 })
    await check(page, "run-live", "Follow me")
    // The colour is a class on a span, the markup in the output is text, and the value never reaches the page.
    const red = page.locator("pre.log span.a-b.a-f31")
    await expect(red.first().textContent()).resolves.toBe("red alert")
    expect(await page.locator("pre.log b").count()).toBe(0)
    expect(await page.content()).not.toContain(SECRET)
    // No inline style anywhere in what the server sent (the CSP would block it); Chromium's own empty ones aside.
    expect(await page.evaluate(`[...document.querySelectorAll("main [style]:not([style=''])")].map((e) => e.outerHTML.slice(0, 200))`)).toEqual([])
    await expect(page.getByRole("button", { name: "Cancel run" }).count()).resolves.toBe(1)

    // The page records when the later line appears; this document must stay the same one (no reload).
    await page.evaluate(`window.groveSameDocument = true
      window.groveShownAt = new Promise((resolve) => {
        const observer = new MutationObserver(() => {
          if (!document.querySelector("pre.log")?.textContent.includes("later line printed at")) return
          // Before the run's end replaces the log with the server's whole rendering: the live lines as inserted.
          const green = [...document.querySelectorAll("pre.log span.a-f32")].some((span) => span.textContent.includes("green after it"))
          resolve({ at: Date.now(), green })
        })
        observer.observe(document.querySelector("main"), { subtree: true, childList: true, characterData: true })
      })
      undefined`)
    releaseStep(workdir)
    const shown = await Promise.race([
      page.evaluate("window.groveShownAt") as Promise<{ at: number; green: boolean }>,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the later line did not appear within 60 s")), 60_000))
    ])
    const text = await page.locator("pre.log").first().textContent()
    const printed = printedAt(text ?? "")
    const delay = shown.at - printed
    // The colour the page's log ended in goes on in the live lines.
    expect(shown.green).toBe(true)
    console.log(`live log line: printed by the step at ${printed}, shown in the browser ${delay} ms later (goal < 1000 ms)`)
    expect(delay).toBeGreaterThanOrEqual(0)
    expect(delay).toBeLessThan(10_000)

    // The end arrives live too: the page shows the finished run (success, Re-run) in the same document.
    await page.locator("#ci-run-state", { hasText: "success" }).waitFor({ timeout: 60_000 })
    await page.getByRole("button", { name: "Re-run" }).waitFor({ timeout: 10_000 })
    expect(await page.evaluate("window.groveSameDocument")).toBe(true)
    await check(page, "run-finished", "later line printed at")
    expect(await page.content()).not.toContain(SECRET)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 300_000)

  it("re-runs a finished run from the page: a new run of the same workflow, branch and commit", async () => {
    const { page, watch } = await signedIn("alice")
    await page.goto(`${server.url}/alice/app/ci/runs/${liveRun}`)
    await Promise.all([page.waitForURL(/\/ci\/runs\/\d+$/), page.getByRole("button", { name: "Re-run" }).click()])
    rerun = Number(/\/ci\/runs\/(\d+)$/.exec(page.url())![1])
    expect(rerun).toBeGreaterThan(liveRun)
    const [before, after] = [await runOf("app", liveRun), await runOf("app", rerun)]
    expect(after).toMatchObject({ workflow_name: "live", branch: before.branch, commit_hash: before.commit_hash, event: "manual", triggered_by: "alice" })
    await page.getByRole("heading", { name: new RegExp(`live #${rerun}`) }).waitFor()
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("cancels a running run from the page", async () => {
    const { page, watch } = await signedIn("alice")
    await workdirOf(rerun)
    await page.goto(`${server.url}/alice/app/ci/runs/${rerun}`)
    await Promise.all([page.waitForURL(`${server.url}/alice/app/ci/runs/${rerun}`), page.getByRole("button", { name: "Cancel run" }).click()])
    await page.locator("#ci-run-state", { hasText: "cancelled" }).waitFor({ timeout: 60_000 })
    expect((await completed("app", rerun)).conclusion).toBe("cancelled")
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)

  it("shows the last 1,000 lines of a long log and links the whole raw log", async () => {
    const { page, watch } = await signedIn("alice")
    const id = await startRun("app", "long")
    await completed("app", id)
    await page.goto(`${server.url}/alice/app/ci/runs/${id}`)
    const log = (await page.locator("pre.log").first().textContent()) ?? ""
    expect(log.split("\n").filter((line) => line !== "")).toHaveLength(1000)
    expect(log.startsWith("row 1501\n")).toBe(true)
    expect(log).toContain("row 2500\n")
    await expect(page.getByText("Showing the last 1,000 lines").isVisible()).resolves.toBe(true)
    const href = await page.getByRole("link", { name: "The whole log" }).getAttribute("href")
    const raw = await page.request.get(`${server.url}${href}`)
    expect(raw.status()).toBe(200)
    expect(raw.headers()["content-type"]).toBe("text/plain; charset=utf-8")
    expect(raw.headers()["x-content-type-options"]).toBe("nosniff")
    const rows = (await raw.text()).replace(/\r/g, "").split("\n").filter((line) => line !== "")
    expect(rows).toEqual(Array.from({ length: 2500 }, (_, i) => `row ${i + 1}`))
    await check(page, "run-long-log", "row 2500")
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 180_000)

  it("lists runs per repository and per branch, newest first, a page at a time; the branch pages link there", async () => {
    const { page, watch } = await signedIn("alice")
    const ids = [await startRun("app", "broken"), await startRun("app", "broken"), await startRun("app", "broken", "feature/ci")]
    for (const id of ids) await completed("app", id)
    await page.goto(`${server.url}/alice/app/ci?limit=2`)
    const runLinks = () => page.locator("table.list tbody tr td:nth-child(2) a").allTextContents()
    expect(await runLinks()).toEqual([`broken #${ids[2]}`, `broken #${ids[1]}`])
    await check(page, "runs", `broken #${ids[2]}`)
    await page.getByRole("link", { name: "Older runs" }).click()
    expect(page.url()).toBe(`${server.url}/alice/app/ci?limit=2&before=${ids[1]}`)
    const second = await runLinks()
    expect(second[0]).toBe(`broken #${ids[0]}`)
    expect(second).toHaveLength(2)
    // The branch page's CI state links to that branch's runs.
    await page.goto(`${server.url}/alice/app/branches/${encodeURIComponent("feature/ci")}`)
    await page.locator(`a[href="/alice/app/ci?branch=feature%2Fci"]`).first().click()
    await page.waitForURL(`${server.url}/alice/app/ci?branch=feature%2Fci`)
    // Every run of the branch and only those (its branch.created run of the invalid workflow too), newest first.
    const ofBranch = (await a().get("/alice/app/ci/runs")).body.filter((run: any) => run.branch === "feature/ci").map((run: any) => `${run.workflow_name} #${run.id}`)
    expect(ofBranch[0]).toBe(`broken #${ids[2]}`)
    expect(await runLinks()).toEqual(ofBranch)
    await check(page, "runs-branch", "CI runs of feature/ci")
    await page.goto(`${server.url}/alice/app/branches`)
    expect(await page.locator(`a[href="/alice/app/ci?branch=feature%2Fci"]`).count()).toBe(1)
    // A malformed cursor is a 400 page, not a 500.
    expect((await page.goto(`${server.url}/alice/app/ci?before=abc`))?.status()).toBe(400)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 180_000)

  it("shows readers no buttons, and a private repository's CI pages are the same 404 page as a missing one's", async () => {
    const { page, watch } = await signedIn("bob")
    const opened = await page.goto(`${server.url}/alice/app/ci/runs/${liveRun}`)
    expect(opened?.status()).toBe(200)
    await page.getByText("later line printed at").first().waitFor()
    expect(await page.getByRole("button", { name: /Re-run|Cancel/ }).count()).toBe(0)
    const hiddenRun = await startRun("hidden", "broken")
    const missing = await page.goto(`${server.url}/alice/nothing-here/ci`)
    expect(missing?.status()).toBe(404)
    const missingBody = await page.locator("main").innerHTML()
    for (const address of ["/alice/hidden/ci", `/alice/hidden/ci/runs/${hiddenRun}`, `/alice/hidden/ci/runs/${hiddenRun}/events`, `/alice/hidden/ci/runs/${hiddenRun}/steps/1/raw`]) {
      const reply = await page.goto(`${server.url}${address}`)
      expect(reply?.status(), address).toBe(404)
      expect(await page.locator("main").innerHTML(), address).toBe(missingBody)
    }
    await check(page, "run-hidden-404", "Not found")
    // A Re-run forged without the page's token is refused.
    const forged = await page.request.post(`${server.url}/alice/app/ci/runs/${liveRun}/rerun`, { form: { csrf: "x" }, headers: { origin: server.url } })
    expect(forged.status()).toBe(403)
    expect(watch.violations).toEqual([])
    expect(watch.errors).toEqual([])
  }, 120_000)
})
