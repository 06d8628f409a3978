/**
 * The web interface in cluster mode: two nodes on Kafka, PostgreSQL and S3. alice signs in through
 * node A (the session is the database's, so node B knows it), opens the branch page on node B at
 * the address the Oak client's `open` uses, and merges there: the merge goes through node B's API,
 * to the Repository entity on whichever node owns its partition. Both nodes then show main's new file.
 * A CI run's page on each node follows the step's log live, whichever node runs it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Browser } from "playwright-core"
import { launchBrowser, skipWithoutChromium, watchPage } from "../support/browser.ts"
import { LIVE_WORKFLOW, liveWorkdir, printedAt, releaseStep } from "../support/ciLive.ts"
import { type ClusterInfra, startClusterInfra } from "../support/ClusterInfra.ts"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"

const skip = skipWithoutChromium("test/web/cluster.browser.test.ts")
const PASSWORD = "alice-password-1"

let infra: ClusterInfra
let nodeA: GroveServer
let nodeB: GroveServer
let browser: Browser
let key: string

describe.skipIf(skip)("web pages on a two-node cluster", () => {
  beforeAll(async () => {
    ;[infra, browser] = await Promise.all([startClusterInfra(), launchBrowser()])
    const created = await run(SERVER_BIN, ["user", "create", "alice", "--password-stdin"], { env: infra.env, input: `${PASSWORD}\n` })
    expect(created.code, created.stderr).toBe(0)
    key = created.stdout.trim().split("\n").pop()!
    nodeA = await startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "15000" }, args: ["--node-id", "web-a"] })
    nodeB = await startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "15000" }, args: ["--node-id", "web-b"] })
  }, 600_000)

  afterAll(async () => {
    await browser?.close()
    await nodeA?.stop()
    await nodeB?.stop()
    await infra?.close()
  })

  it("signs in on node A, merges a branch from its page on node B", async () => {
    const a = api(nodeA.url, key)
    // Right after the nodes join, a write may answer 202 while partitions move: wait for the repository.
    await waitFor("the repository", async () => {
      const created = await a.post("/repos", { name: "site", is_public: true })
      if (created.status === 201 || created.status === 409) return true
      return (await a.get("/alice/site")).status === 200 ? true : undefined
    }, 120_000)
    const c = buildCommit({ branch: "feature/page", files: { "index.md": "# Site\n" }, parentHash: null, parentSnapshot: new Map() })
    const pushed = await a.post("/alice/site/push", pushBody({ branch: "feature/page", commits: [c], description: "Add the index" }))
    expect(pushed.body, JSON.stringify(pushed.body)).toMatchObject({ success: true })

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    try {
      const page = await context.newPage()
      const watch = await watchPage(page)
      await page.goto(`${nodeA.url}/-/signin`)
      await page.getByLabel("User name").fill("alice")
      await page.getByLabel("Password").fill(PASSWORD)
      await Promise.all([page.waitForURL(`${nodeA.url}/`), page.getByRole("button", { name: "Sign in" }).click()])
      // The same cookie, on the other node (same host, another port: cookies are per host).
      const session = (await context.cookies(nodeA.url)).find((cookie) => cookie.name === "grove_session")!
      expect(session).toBeDefined()
      const response = await page.goto(`${nodeB.url}/alice/site/branches/feature%2Fpage`)
      expect(response?.status()).toBe(200)
      expect(await page.locator("header.top").innerText()).toContain("alice")
      await page.getByRole("button", { name: "Merge into main" }).click()
      await page.locator(".meta .badge", { hasText: "merged" }).waitFor({ timeout: 60_000 })
      for (const node of [nodeA, nodeB]) {
        await page.goto(`${node.url}/alice/site`)
        expect(await page.getByRole("link", { name: "index.md" }).count()).toBe(1)
      }
      expect(watch.violations).toEqual([])
      expect(watch.errors).toEqual([])
    } finally {
      await context.close()
    }
  }, 300_000)

  it("follows a CI log live on both nodes while one of them runs the step", async () => {
    const a = api(nodeA.url, key)
    expect((await a.post("/repos", { name: "live", is_public: true })).status).toBe(201)
    const c = buildCommit({ branch: "setup", files: { ".oak/workflows/live.yml": LIVE_WORKFLOW }, parentHash: null, parentSnapshot: new Map() })
    const pushed = await a.post("/alice/live/push", pushBody({ branch: "setup", commits: [c], description: "A live step" }))
    expect(pushed.body, JSON.stringify(pushed.body)).toMatchObject({ success: true })
    const started = await a.post("/alice/live/ci/runs", { workflow: "live", branch: "setup" })
    expect(started.status, JSON.stringify(started.body)).toBe(201)
    const id = started.body.run_ids[0] as number
    const workdir = await liveWorkdir(async () => (await a.get(`/alice/live/ci/runs/${id}`)).body)
    // A public repository: anonymous readers follow it. One node runs the step, so one page follows it from the other.
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    try {
      const pages = []
      for (const node of [nodeA, nodeB]) {
        const page = await context.newPage()
        const watch = await watchPage(page)
        await page.goto(`${node.url}/alice/live/ci/runs/${id}`)
        await page.getByText("workdir=").first().waitFor({ timeout: 30_000 })
        pages.push({ node, page, watch })
      }
      releaseStep(workdir)
      for (const { node, page } of pages) {
        await page.getByText("later line printed at").first().waitFor({ timeout: 30_000 })
        const delay = Date.now() - printedAt((await page.locator("pre.log").first().textContent()) ?? "")
        console.log(`cluster: the live line on ${node === nodeA ? "node A" : "node B"}'s page at most ${delay} ms after the step printed it`)
        expect(delay).toBeLessThan(10_000)
      }
      for (const { page, watch } of pages) {
        await page.locator("#ci-run-state", { hasText: "success" }).waitFor({ timeout: 60_000 })
        expect(watch.violations).toEqual([])
        expect(watch.errors).toEqual([])
      }
    } finally {
      await context.close()
    }
  }, 300_000)
})
