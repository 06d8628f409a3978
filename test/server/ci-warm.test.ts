/**
 * CI sandboxes started ahead of their steps (issue 24, ci/WarmSandboxes.ts): a job's first step runs
 * in a sandbox that was waiting before the run was queued. It is the same sandbox as before (own
 * network through pasta, own user, nothing of the host), its PID 1 holds no run's environment, and
 * no run's files, processes, /tmp or variables reach the next run; a run in one still cancels. A server
 * starts them only once it runs CI: none wait before its first job.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { ciRuns, logsOf } from "../support/ciRuns.ts"
import { waitFor } from "../support/waitFor.ts"

let server: GroveServer
let token = ""
const as = () => api(server.url, token)
const SECRET = "warm-secret-7d41c2"
const METRICS_TOKEN = "warm-metrics-5e0b"

const workflow = (name: string, run: ReadonlyArray<string>, extra: ReadonlyArray<string> = []) =>
  [`on: [manual]`, "jobs:", `  ${name}:`, ...extra.map((line) => `    ${line}`), "    steps:", "      - run: |", ...run.map((line) => `          ${line}`)].join("\n")

const WORKFLOWS = {
  // Leaves everything it can behind: files in /tmp and in its workspace, a daemon, a variable of its own.
  // (The probe's /tmp holds only the path down to its workspace, which is bound there.)
  ".oak/workflows/leave.yml": workflow("leave", [
    "echo left > /tmp/left-behind && echo left > left-behind",
    "setsid sleep 3011 < /dev/null > /dev/null 2>&1 &",
    "echo \"workspace=$GROVE_WORKSPACE\"",
    "echo leave-done"
  ], ["env:", "  LEAVE_ONLY: leave-variable"]),
  ".oak/workflows/probe.yml": workflow("probe", [
    "echo \"pid1-grove=$(tr '\\0' '\\n' < /proc/1/environ | grep -c -e GROVE_ -e API -e SECRET || true)\"",
    "echo \"run=$GROVE_RUN_ID term=$TERM pwd-is-workspace=$([ \"$PWD\" = \"$GROVE_WORKSPACE\" ] && echo yes) home=$([ \"$HOME\" = \"$GROVE_WORKSPACE\" ] && echo yes)\"",
    "echo \"secret-len=${#API_TOKEN} leave=${LEAVE_ONLY:-none}\"",
    "echo \"tmp=[$(ls -A /tmp | grep -vx \"$(echo \"$GROVE_WORKSPACE\" | cut -d/ -f3)\")] here=[$(ls -A)] daemons=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c '^301[1]$' || true)\"",
    "echo \"workspace=$GROVE_WORKSPACE uid=$(id -un)\"",
    "echo \"links=$(grep -c : /proc/net/dev)\""
  ]),
  ".oak/workflows/offline.yml": workflow("offline", ["echo \"links=$(grep -c : /proc/net/dev)\""], ["network: false"]),
  ".oak/workflows/hold.yml": workflow("hold", ["echo holding", "sleep 3012"])
}

const { start, completed } = ciRuns(as, "ops/app")

const field = (logs: string, name: string) => new RegExp(`${name}=(\\S*)`).exec(logs)?.[1]

/** Host processes whose command line holds `marker`. */
const hostProcesses = (marker: string) =>
  fs.readdirSync("/proc").filter((pid) => /^\d+$/.test(pid)).filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").includes(marker)
    } catch {
      return false
    }
  })

beforeAll(async () => {
  server = await startServer({ args: ["--metrics-token", METRICS_TOKEN] })
  token = await server.createUser("ops")
  expect((await as().post("/repos", { name: "app" })).status).toBe(201)
  expect((await as().raw("PUT", "/ops/app/ci/secrets", { name: "API_TOKEN", value: SECRET })).status).toBe(200)
  const c = buildCommit({ branch: "main-setup", files: WORKFLOWS })
  const pushed = await as().post("/ops/app/push", pushBody({ branch: "main-setup", commits: [c], description: "Workflows" }))
  expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
  expect((await as().post("/ops/app/branches/main-setup/merge")).status).toBe(200)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

/** The server's descendants among the host processes whose command line holds `marker`. */
const serverProcesses = (marker: string) => {
  const parents = new Map<string, string>()
  for (const pid of fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      parents.set(pid, fs.readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")[1]!)
    } catch {
      // gone meanwhile
    }
  }
  const root = String(server.process.pid)
  const descends = (pid: string): boolean => {
    for (let at = parents.get(pid); at !== undefined && at !== "0"; at = parents.get(at)) if (at === root) return true
    return false
  }
  return hostProcesses(marker).filter(descends)
}

/** This server's sandbox processes started ahead (pasta, bwrap and the shell waiting in it). */
const sandboxProcesses = () => serverProcesses("grove-sandbox-ready")

/** The server's count of sandboxes ready and waiting for a step. */
const waiting = async () => {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()
  const line = text.split("\n").find((l) => l.startsWith("grove_ci_sandboxes_waiting"))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1))
}

describe("CI sandboxes started ahead", () => {
  it("starts none before the server's first job, then keeps them waiting", async () => {
    // Set up (a repository, its workflows pushed and merged) but no run yet: nothing waits.
    expect(sandboxProcesses()).toEqual([])
    expect(await waiting()).toBe(0)
    // The first job starts its own sandbox (none was waiting); the pool (2: one per runner) fills meanwhile.
    const first = await completed(await start("probe"))
    expect(first.conclusion, logsOf(first)).toBe("success")
    // Generous: under load a start that fails is tried again after a pause that doubles up to 30 s.
    await waitFor("sandboxes waiting after the first job", async () => (await waiting()) === 2 || undefined, 200_000)
    expect(sandboxProcesses().length).toBeGreaterThan(0)
  }, 300_000)

  it("runs a step with its own environment, while the sandbox's PID 1 holds none of the run's", async () => {
    const id = await start("probe")
    const run = await completed(id)
    const logs = logsOf(run)
    expect(run.conclusion, logs).toBe("success")
    // A step started cold has its whole environment, secrets included, in bwrap's (PID 1's) too.
    expect(field(logs, "pid1-grove"), logs).toBe("0")
    expect(logs).toContain(`run=${id} term=xterm pwd-is-workspace=yes home=yes`)
    expect(logs).toContain(`secret-len=${SECRET.length} leave=none`)
    expect(logs).toContain("tmp=[] here=[.oak]")
    expect(field(logs, "uid")).toBe("nobody")
    // lo and pasta's interface: the network is on.
    expect(field(logs, "links")).toBe("2")
  }, 180_000)

  it("never carries a run's files, /tmp, processes or variables into the next run", async () => {
    const left = await completed(await start("leave"))
    expect(left.conclusion, logsOf(left)).toBe("success")
    const leftWorkspace = field(logsOf(left), "workspace")
    // More runs than sandboxes kept waiting, one after another and at once: every sandbox gets used after the leaver.
    const runs = []
    for (let i = 0; i < 3; i++) runs.push(await completed(await start("probe")))
    runs.push(...await Promise.all([start("probe"), start("leave"), start("probe")].map(async (id) => completed(await id))))
    const probes = runs.filter((r: any) => r.workflow_name === "probe")
    // Runs started at once may outrun the sandboxes kept waiting (a job then starts its own): some ran in one.
    expect(probes.filter((run: any) => field(logsOf(run), "pid1-grove") === "0").length).toBeGreaterThan(0)
    for (const run of probes) {
      const logs = logsOf(run)
      expect(run.conclusion, logs).toBe("success")
      expect(logs).toContain("leave=none")
      expect(logs).toContain("tmp=[] here=[.oak]")
      expect(field(logs, "daemons"), logs).toBe("0")
      expect(field(logs, "workspace")).not.toBe(leftWorkspace)
    }
    // The daemons ended with their runs.
    await waitFor("the leavers' daemons gone", async () => hostProcesses("sleep 3011").length === 0 || undefined, 30_000)
  }, 300_000)

  it("still runs a job without the network in a sandbox of its own, offline", async () => {
    const run = await completed(await start("offline"))
    expect(run.conclusion, logsOf(run)).toBe("success")
    expect(field(logsOf(run), "links")).toBe("1")
  }, 180_000)

  it("cancels a run in a warm sandbox and kills its processes", async () => {
    const id = await start("hold")
    await waitFor("the step holding", async () => {
      const run = await as().get(`/ops/app/ci/runs/${id}`)
      return logsOf(run.body).includes("holding") || undefined
    }, 60_000)
    expect(hostProcesses("sleep 3012").length).toBeGreaterThan(0)
    expect((await as().post(`/ops/app/ci/runs/${id}/cancel`)).status).toBe(204)
    const run = await completed(id)
    expect(run.conclusion).toBe("cancelled")
    await waitFor("the step's processes gone", async () => hostProcesses("sleep 3012").length === 0 || undefined, 30_000)
  }, 180_000)
})
