/**
 * Benchmark: native CI on one embedded server, each number beside a baseline measured in the same
 * run on the same machine (the machine is shared and noisy; compare the ratios):
 *   - trigger to running: `POST …/ci/runs` until the run reads `running` (polled every 5 ms),
 *     against spawning the same shell in a pseudo-terminal directly (node-pty, no server);
 *   - first byte of a live log: a step prints the time; the follower of `…/logs?follow=1` sees it
 *     (both clocks are this machine's), against a local pty's first byte after spawn;
 *   - runs per minute of a no-op workflow with the default pool (2 runners), against the same
 *     shells spawned directly two at a time; once with the network on (the default: pasta per run)
 *     and once with `network: false` (no pasta: what the server path itself can do);
 *   - the server's RSS while 20 runs execute at once (a second server with 20 runners), against
 *     the same server idle.
 * The server's CPU includes its CI process starter's (PtySpawner's helper, a child process), its RSS the
 * helper's private memory; the sandboxes' CPU (pasta, bwrap, the steps: the helper's reaped children) is given apart.
 *
 *   npm run bench:ci [-- --runs 30 --throughput 40 --pool 4 --bin other/checkout/packages/server/bin/grove-server.js]
 *
 * SQL statements and entity commands per no-op run: scripts/bench/ci-statements.ts.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import type * as Pty from "node-pty"
import { buildCommit, pushBody } from "../../test/support/content.ts"
import { type GroveServer, startServer } from "../../test/support/GroveServer.ts"
import { api } from "../../test/support/http.ts"
import { numberArg } from "./load.ts"
import { type Measure, MiB, percentile } from "./table/measure.ts"

const pty = createRequire(path.resolve(import.meta.dirname, "../../packages/server/package.json"))("node-pty") as typeof Pty

const WORKFLOWS = {
  ".oak/workflows/noop.yml": "on: [manual]\njobs:\n  a:\n    steps:\n      - run: 'true'\n",
  // The same without pasta: what the server path itself can do.
  ".oak/workflows/noop-offline.yml": "on: [manual]\njobs:\n  a:\n    network: false\n    steps:\n      - run: 'true'\n",
  ".oak/workflows/stamp.yml": "on: [manual]\njobs:\n  a:\n    steps:\n      - run: echo \"stamp $(date +%s%N)\"; sleep 0.3\n",
  ".oak/workflows/hold.yml": "on: [manual]\njobs:\n  a:\n    steps:\n      - run: echo holding; sleep 4\n"
}

const sleep = (n: number) => new Promise((resolve) => setTimeout(resolve, n))

/** One shell in a pty, as a step runs: resolves with the time to its first byte and its end. */
const directShell = (command: string) =>
  new Promise<{ firstByte: number; total: number }>((resolve) => {
    const start = performance.now()
    let firstByte = -1
    const child = pty.spawn("/bin/bash", ["--noprofile", "--norc", "-e", "-c", command], { name: "xterm", cols: 120, rows: 40, cwd: os.tmpdir(), env: { PATH: "/usr/bin:/bin" } })
    child.onData(() => {
      if (firstByte < 0) firstByte = performance.now() - start
    })
    child.onExit(() => resolve({ firstByte, total: performance.now() - start }))
  })

export const setup = async (server: GroveServer) => {
  const key = await server.createUser("bench")
  const as = api(server.url, key)
  await as.post("/repos", { name: "ci" })
  const c = buildCommit({ branch: "main-setup", files: WORKFLOWS })
  const pushed = await as.post("/bench/ci/push", pushBody({ branch: "main-setup", commits: [c], description: "Workflows" }))
  if (pushed.body.success !== true) throw new Error(JSON.stringify(pushed.body))
  const merged = await as.post("/bench/ci/branches/main-setup/merge")
  if (merged.status !== 200) throw new Error(JSON.stringify(merged.body))
  return { as, key }
}

export const start = async (as: ReturnType<typeof api>, workflow: string): Promise<number> => {
  const reply = await as.post("/bench/ci/ci/runs", { workflow })
  if (reply.status !== 201) throw new Error(JSON.stringify(reply.body))
  return reply.body.run_ids[0]
}

export const until = async (as: ReturnType<typeof api>, id: number, status: "running" | "completed", every = 5) => {
  for (;;) {
    const run = await as.get(`/bench/ci/ci/runs/${id}?logs=false`)
    if (run.body.status === status || run.body.status === "completed") return run.body
    await sleep(every)
  }
}

/** Reads a run's live log (server-sent events) until its `end` event: how a user waits for a run without polling. */
const followToEnd = async (url: string, key: string, id: number) => {
  const response = await fetch(`${url}/api/bench/ci/ci/runs/${id}/logs?follow=1`, { headers: { authorization: `Bearer ${key}` } })
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let seen = ""
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    seen += value
    if (seen.includes("event: end\n")) return void await reader.cancel()
  }
}

/**
 * Waits until every run of a burst completed: the last one's live log until it ends, then one listing (a run still
 * going, the other runner's, is followed too). Not a GET per run every few ms: those would be most of the server's
 * CPU per run, and no user polls so.
 */
export const allCompleted = async (url: string, key: string, as: ReturnType<typeof api>, ids: ReadonlyArray<number>) => {
  let open = [ids[ids.length - 1]!]
  for (;;) {
    for (const id of open) await followToEnd(url, key, id)
    const list = await as.get(`/bench/ci/ci/runs?limit=${Math.min(200, ids.length + 5)}`)
    const listed = (list.body as Array<{ id: number; status: string }>).filter((run) => ids.includes(run.id))
    if (listed.length !== ids.length) throw new Error(`the listing shows ${listed.length} of the burst's ${ids.length} runs`)
    open = listed.filter((run) => run.status !== "completed").map((run) => run.id)
    if (open.length === 0) return
  }
}

/** The fields of /proc/<pid>/stat after the command's name (utime is [11]). */
const statFields = (pid: number) => readProc(`/proc/${pid}/stat`).replace(/^.*\) /, "").split(" ")

/** The process's CPU time (user + system), ms; 0 once it is gone. */
const ownCpuMs = (pid: number) => {
  const fields = statFields(pid)
  return (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) * 10
}

const readProc = (file: string) => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return ""
  }
}

/** The server's CI process starter (PtySpawner's helper, a child of it), when it runs one. */
const helpers = (pid: number): Array<number> =>
  fs.readdirSync(`/proc/${pid}/task`).flatMap((task) => readProc(`/proc/${pid}/task/${task}/children`).trim().split(" "))
    .filter((child) => child !== "" && readProc(`/proc/${child}/cmdline`).includes("PtyHelper"))
    .map(Number)

/** The server's CPU time and its helper's (not the steps'), ms. */
const cpuMs = (pid: number) => ownCpuMs(pid) + helpers(pid).reduce((sum, helper) => sum + ownCpuMs(helper), 0)

/**
 * The CPU time of the sandboxes the helper started and reaped (pasta, bwrap, the steps' shells), ms: its children's
 * (cutime + cstime). Not the kernel's work for them done elsewhere (a network namespace's teardown).
 */
const sandboxCpuMs = (pid: number) =>
  helpers(pid).reduce((sum, helper) => {
    const fields = statFields(helper)
    return sum + (Number(fields[13] ?? 0) + Number(fields[14] ?? 0)) * 10
  }, 0)

/**
 * The server's RSS and the memory its helper adds, KiB: the helper's private pages only (~12 of its ~52 MiB
 * RSS; the rest is the node binary's and libraries' pages, shared with the server's).
 */
const rssKiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readProc(`/proc/${pid}/status`))?.[1] ?? 0) +
  helpers(pid).reduce((sum, helper) => {
    const rollup = readProc(`/proc/${helper}/smaps_rollup`)
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(rollup)?.[1] ?? 0)
    return sum + field("Private_Clean") + field("Private_Dirty")
  }, 0)

export interface CiOptions {
  /** Runs per latency measure. */
  readonly runs: number
  /** No-op runs for the throughput measure. */
  readonly throughput: number
  /** The server's entry point (another checkout's, to compare two versions in one sitting); grove-server by default. */
  readonly bin?: string | undefined
  /** Runners of the measured server (`--ci-concurrency`); the server's default when undefined. */
  readonly pool?: number | undefined
}

/** A burst of no-op runs on the default pool. */
export interface Burst {
  readonly perMinute: number
  /** The server's CPU time per no-op run (its process and its CI process starter's, not the steps'), ms. */
  readonly cpuPerRun: number
  /** The sandboxes' CPU time per no-op run (pasta, bwrap, the step's shell), ms. */
  readonly sandboxCpuPerRun: number
}

export interface CiResult {
  readonly options: CiOptions
  readonly cores: number
  /** Milliseconds per run, and of the same-run baselines. */
  readonly toRunning: ReadonlyArray<number>
  readonly direct: ReadonlyArray<number>
  readonly firstByte: ReadonlyArray<number>
  readonly firstByteDirect: ReadonlyArray<number>
  /** No-op runs with the network on (the default) and with `network: false`. */
  readonly online: Burst
  readonly offline: Burst
  readonly directPerMinute: number
  /** KiB: the server idle, and its peak while 20 runs ran (sampled until all completed), with its CI process starter's private memory. */
  readonly idleRss: number
  readonly peakRss: number
  /** The most runs seen running at once. */
  readonly runningAtPeak: number
}

export const measureCi = async (options: CiOptions): Promise<CiResult> => {
  const RUNS = options.runs
  const THROUGHPUT = options.throughput
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-ci-"))
  const bin = options.bin === undefined ? {} : { bin: options.bin }
  const server = await startServer({ dataDir, ...bin, args: options.pool === undefined ? [] : ["--ci-concurrency", String(options.pool)] })
  const direct: Array<number> = []
  const toRunning: Array<number> = []
  const firstByteDirect: Array<number> = []
  const firstByte: Array<number> = []
  let online: Burst = { perMinute: 0, cpuPerRun: 0, sandboxCpuPerRun: 0 }
  let offline = online
  let directPerMinute = 0
  try {
    const { as, key } = await setup(server)

    // Trigger to running.
    for (let i = 0; i < RUNS; i++) direct.push((await directShell("true")).total)
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now()
      const id = await start(as, "noop")
      await until(as, id, "running")
      toRunning.push(performance.now() - t0)
      await until(as, id, "completed", 20)
    }

    // First byte of a live log.
    for (let i = 0; i < RUNS; i++) firstByteDirect.push((await directShell("echo hi")).firstByte)
    for (let i = 0; i < Math.min(RUNS, 15); i++) {
      const id = await start(as, "stamp")
      const response = await fetch(`${server.url}/api/bench/ci/ci/runs/${id}/logs?follow=1`, { headers: { authorization: `Bearer ${key}` } })
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
      let seen = ""
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        seen += value
        const stamp = /stamp (\d+)/.exec(seen)
        if (stamp !== null) {
          firstByte.push(Date.now() - Number(BigInt(stamp[1]!) / 1_000_000n))
          await reader.cancel()
          break
        }
      }
      await until(as, id, "completed", 20)
    }

    // Throughput with the default pool: the network on, then off (after two runs of its own to warm its path).
    const burst = async (workflow: string): Promise<Burst> => {
      const pid = server.process.pid!
      const t0 = performance.now()
      const cpu0 = cpuMs(pid)
      const sandbox0 = sandboxCpuMs(pid)
      const ids: Array<number> = []
      for (let i = 0; i < THROUGHPUT; i++) ids.push(await start(as, workflow))
      await allCompleted(server.url, key, as, ids)
      return {
        perMinute: THROUGHPUT / ((performance.now() - t0) / 60_000),
        cpuPerRun: (cpuMs(pid) - cpu0) / THROUGHPUT,
        sandboxCpuPerRun: (sandboxCpuMs(pid) - sandbox0) / THROUGHPUT
      }
    }
    online = await burst("noop")
    for (let i = 0; i < 2; i++) await allCompleted(server.url, key, as, [await start(as, "noop-offline")])
    offline = await burst("noop-offline")
    const d0 = performance.now()
    for (let i = 0; i < THROUGHPUT; i += 2) await Promise.all([directShell("true"), directShell("true")])
    directPerMinute = THROUGHPUT / ((performance.now() - d0) / 60_000)
  } finally {
    await server.stop()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }

  // RSS with 20 runs at once.
  const wide = await startServer({ args: ["--ci-concurrency", "20"], ...bin })
  try {
    const { as } = await setup(wide)
    const pid = wide.process.pid!
    await sleep(1000)
    const idle = rssKiB(pid)
    const ids = await Promise.all(Array.from({ length: 20 }, () => start(as, "hold")))
    // Sampled from the start until every run completed, not only until 20 are going: the peak is real.
    let peak = idle
    let running = 0
    for (;;) {
      peak = Math.max(peak, rssKiB(pid))
      const list = await as.get("/bench/ci/ci/runs?limit=20")
      const statuses = list.body.map((r: { status: string }) => r.status)
      running = Math.max(running, statuses.filter((s: string) => s === "running").length)
      peak = Math.max(peak, rssKiB(pid))
      if (statuses.length >= ids.length && statuses.every((s: string) => s === "completed")) break
      await sleep(100)
    }
    return { options, cores: os.cpus().length, toRunning, direct, firstByte, firstByteDirect, directPerMinute, online, offline, idleRss: idle, peakRss: peak, runningAtPeak: running }
  } finally {
    await wide.stop()
  }
}

/** A p50 latency row whose goal is under 15 ms, with its p99 in the detail. */
const latencyMeasure = (id: string, name: string, samples: ReadonlyArray<number>, baselineName: string, baseline: ReadonlyArray<number>): Measure => ({
  id,
  name,
  value: percentile(samples, 0.5),
  unit: "ms",
  baselineName,
  baseline: percentile(baseline, 0.5),
  better: "lower",
  goal: "< 15 ms",
  met: percentile(samples, 0.5) < 15,
  samples: { value: samples, baseline },
  detail: `p99 ${percentile(samples, 0.99).toFixed(1)} ms over ${samples.length} runs`
})

/** A no-op runs/min row; its detail gives the server's and the sandboxes' CPU per run apart. */
const burstMeasure = (id: string, name: string, burst: Burst, r: CiResult): Measure => ({
  id,
  name,
  value: burst.perMinute,
  unit: "/min",
  baselineName: "bare pty shells, 2 at once",
  baseline: r.directPerMinute,
  better: "higher",
  goal: ">= 3000/min",
  met: burst.perMinute >= 3000,
  detail: `${r.options.throughput} runs, ${burst.cpuPerRun.toFixed(1)} ms server CPU per run (with the CI process starter's), ${burst.sandboxCpuPerRun.toFixed(1)} ms in its sandboxes`
})

export const ciMeasures = (r: CiResult): Array<Measure> => [
  latencyMeasure("ci.trigger", "CI trigger -> running, p50", r.toRunning, "bare pty shell", r.direct),
  latencyMeasure("ci.first-byte", "CI first log byte, p50", r.firstByte, "local pty first byte", r.firstByteDirect),
  burstMeasure("ci.noop", "CI no-op runs/min, default pool", r.online, r),
  burstMeasure("ci.noop.offline", "CI no-op runs/min, network: false", r.offline, r),
  {
    id: "rss.ci20",
    name: "server RSS with 20 CI runs",
    value: r.peakRss / 1024,
    unit: "MiB",
    baselineName: "the same server idle",
    baseline: r.idleRss / 1024,
    better: "lower",
    goal: "< 300 MiB",
    met: r.peakRss * 1024 < 300 * MiB,
    detail: `up to ${r.runningAtPeak} running at once, sampled until all completed; with the CI process starter's private memory`
  }
]

const ms = (n: number) => `${n.toFixed(1).padStart(7)} ms`

const main = async () => {
  const pool = stringArg("pool")
  const options = { runs: numberArg("runs", 30), throughput: numberArg("throughput", 40), bin: stringArg("bin"), pool: pool === undefined ? undefined : Number(pool) }
  console.log(`CI benchmark: ${options.runs} runs per latency, ${options.throughput} no-op runs for throughput, on ${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(1)}${options.bin === undefined ? "" : `, server ${options.bin}`}${pool === undefined ? "" : `, ${pool} runners`}\n`)
  const r = await measureCi(options)
  console.log(`trigger -> running          p50 ${ms(percentile(r.toRunning, 0.5))}  p99 ${ms(percentile(r.toRunning, 0.99))}`)
  console.log(`  baseline: a pty shell     p50 ${ms(percentile(r.direct, 0.5))}  p99 ${ms(percentile(r.direct, 0.99))}   ratio p50 ${(percentile(r.toRunning, 0.5) / percentile(r.direct, 0.5)).toFixed(1)}x`)
  console.log(`live log first byte         p50 ${ms(percentile(r.firstByte, 0.5))}  p99 ${ms(percentile(r.firstByte, 0.99))}`)
  console.log(`  baseline: a pty's output  p50 ${ms(percentile(r.firstByteDirect, 0.5))}  p99 ${ms(percentile(r.firstByteDirect, 0.99))}`)
  for (const [name, burst] of [["network on ", r.online], ["network off", r.offline]] as const) {
    console.log(`no-op runs per minute, ${name} ${burst.perMinute.toFixed(0).padStart(7)}      (${pool === undefined ? "default pool: 2" : pool} runners)`)
    console.log(`  server CPU per run         ${burst.cpuPerRun.toFixed(1).padStart(7)} ms`)
    console.log(`  sandboxes' CPU per run     ${burst.sandboxCpuPerRun.toFixed(1).padStart(7)} ms   (pasta, bwrap, the step's shell)`)
  }
  console.log(`  baseline: shells, 2 at once ${r.directPerMinute.toFixed(0).padStart(5)}      ratio ${(r.online.perMinute / r.directPerMinute).toFixed(3)}x on, ${(r.offline.perMinute / r.directPerMinute).toFixed(3)}x off`)
  console.log(`server RSS, 20 runs at once ${(r.peakRss / 1024).toFixed(1).padStart(7)} MiB   (up to ${r.runningAtPeak} at once)`)
  console.log(`  baseline: idle            ${(r.idleRss / 1024).toFixed(1).padStart(7)} MiB   ratio ${(r.peakRss / r.idleRss).toFixed(3)}x`)
}

/** `--name value` from the command line. */
export const stringArg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1] : undefined
}

if (import.meta.main) await main()
