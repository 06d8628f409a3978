/**
 * A manual start whose queuing command does not answer in time (202, the operation pending), on a node with
 * a free runner (CiHandlers' reservation, CiQueueCommand's `startOn`): the command still records the run as
 * started by this node, so the handler follows the command's outcome and hands the run to the reserved
 * runner. Before, it gave the runner back: the run stayed `running` with no runner and was failed as lost
 * ~15-20 s later. The same for a queued run the dispatcher claims (its Start answers late): the runner follows
 * the Start's outcome. The server is restarted on its data with a 1 ms command deadline and one runner, so
 * every command answers 202 and applies after.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { logsOf } from "../support/ciRuns.ts"
import { waitFor } from "../support/waitFor.ts"

let server: GroveServer | undefined
let dataDir = ""
let token = ""
const METRICS_TOKEN = "ci-pending-metrics-61d0"
const as = () => api(server!.url, token)

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-ci-pending-"))
  server = await startServer({ dataDir })
  token = await server.createUser("pat")
  expect((await as().post("/repos", { name: "app" })).status).toBe(201)
  const c = buildCommit({
    branch: "work",
    files: {
      ".oak/workflows/quick.yml": ["on: [manual]", "jobs:", "  quick:", "    steps:", "      - run: echo pending-ok"].join("\n"),
      ".oak/workflows/hold.yml": ["on: [manual]", "jobs:", "  hold:", "    steps:", "      - run: echo holding; sleep 4"].join("\n")
    }
  })
  const pushed = await as().post("/pat/app/push", pushBody({ branch: "work", commits: [c], description: "Workflow" }))
  expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
  await server.stop()
  server = undefined
  server = await startServer({ dataDir, args: ["--command-timeout-ms", "1", "--ci-concurrency", "1", "--metrics-token", METRICS_TOKEN] })
  // The runners are ready (a handler can reserve one): before that a start is only queued for a claim.
  await waitFor("the CI runners ready", async () => {
    const text = await (await fetch(`${server!.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()
    return /^grove_ci_runner_slots [1-9]/m.test(text) || undefined
  }, 120_000)
}, 400_000)

afterAll(async () => {
  await server?.stop()
  if (dataDir !== "") fs.rmSync(dataDir, { recursive: true, force: true })
})

describe("CI start whose queuing command answers late", () => {
  it("runs the run the command started on this node once the outcome is known", async () => {
    const reply = await as().post("/pat/app/ci/runs", { workflow: "quick", branch: "work" })
    // The command's answer did not come within 1 ms: the write is pending (and applies after).
    expect(reply.status, JSON.stringify(reply.body)).toBe(202)
    const run = await waitFor("the run completed", async () => {
      const runs = (await as().get("/pat/app/ci/runs")).body
      const found = Array.isArray(runs) ? runs[0] : undefined
      return found?.status === "completed" ? (await as().get(`/pat/app/ci/runs/${found.id}`)).body : undefined
    }, 120_000)
    // Not failed as lost by the sweeper ("the runner ... stopped reporting"): its runner ran it.
    expect(run.error, `${JSON.stringify(run)}\n${server!.output().split("\n").filter((l) => !l.includes('"route":"/api/:owner/:name/ci/runs"') || l.includes("POST")).join("\n").slice(-8000)}`).toBeNull()
    expect(run.conclusion, logsOf(run)).toBe("success")
    expect(logsOf(run)).toContain("pending-ok")
  }, 180_000)

  it("runs a queued run whose claim (the dispatcher's Start) answers late", async () => {
    // The last test's runner given back (its run reads completed a moment before): else `hold` is queued, and
    // `quick` takes the runner as it frees up, by a reservation, before the dispatcher claims `hold`.
    await waitFor("the runner free", async () => {
      const text = await (await fetch(`${server!.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()
      return /^grove_ci_runner_slots_busy 0$/m.test(text) || undefined
    }, 60_000)
    const before = (await as().get("/pat/app/ci/runs")).body.length
    // The one runner is taken by `hold` (4 s); `quick` waits queued, and the dispatcher claims it once `hold` ends.
    expect((await as().post("/pat/app/ci/runs", { workflow: "hold", branch: "work" })).status).toBe(202)
    expect((await as().post("/pat/app/ci/runs", { workflow: "quick", branch: "work" })).status).toBe(202)
    // Both are recorded (their commands answered 202 and apply after): `hold` running in the one runner, `quick`
    // queued, so it is started by the dispatcher's claim and not by a reservation of a free runner.
    // (`hold` is queued first if the runner was not yet given back by the last test's run: then claimed.)
    const listed = await waitFor("both runs recorded, hold started", async () => {
      const list = (await as().get("/pat/app/ci/runs")).body
      const two = list.length >= before + 2 ? list.slice(0, 2) : []
      return two.some((r: { workflow_name: string; status: string }) => r.workflow_name === "hold" && r.status !== "queued") ? two : undefined
    }, 60_000)
    const states = Object.fromEntries(listed.map((r: { workflow_name: string; status: string }) => [r.workflow_name, r.status]))
    expect(states, JSON.stringify(listed)).toEqual({ hold: "running", quick: "queued" })
    const runs = await waitFor("both runs completed", async () => {
      const list = (await as().get("/pat/app/ci/runs")).body
      return list.length >= before + 2 && list.slice(0, 2).every((r: { status: string }) => r.status === "completed") ? list.slice(0, 2) : undefined
    }, 120_000)
    for (const { id } of runs) {
      const run = (await as().get(`/pat/app/ci/runs/${id}`)).body
      // Not failed as lost ("the runner ... stopped reporting"): the claim's runner ran it.
      expect(run.error, JSON.stringify(run)).toBeNull()
      expect(run.conclusion, logsOf(run)).toBe("success")
    }
    const quick = runs.find((r: { workflow_name: string }) => r.workflow_name === "quick")
    expect(quick, JSON.stringify(runs)).toBeDefined()
    expect(logsOf((await as().get(`/pat/app/ci/runs/${quick.id}`)).body)).toContain("pending-ok")
  }, 180_000)
})
