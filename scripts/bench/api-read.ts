/**
 * Benchmark: `GET /api/{owner}/{name}` with a personal API key at concurrency
 * 64 against the embedded server, and the same load against a bare node:http
 * server answering the same JSON body, measured in the same run. Prints req/s,
 * p50, p99, the ratio (target >= 0.5x), the bytes each allocates per request
 * (V8 heap, counted by table/alloc-probe.ts), and the server's RSS idle after its
 * first boot, idle after a restart on the same data, and after 10k reads.
 *
 *   npm run bench:api-read [-- --duration 10 --connections 64 --reads 10000 --rounds 1]
 *   npm run bench:api-read -- --nodes N   cluster mode: N nodes on Kafka/PostgreSQL/MinIO,
 *                                          CPU per read per node and the infrastructure's share
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { createClusterUser, startClusterInfra } from "../../test/support/ClusterInfra.ts"
import { type GroveServer, startServer } from "../../test/support/GroveServer.ts"
import { rssOf } from "./content/procs.ts"
import { line, load, numberArg, type Result } from "./load.ts"
import { allocProbeEnv, allocWindow } from "./table/alloc-probe.ts"
import { costReport, cpuDuring, snapshot } from "./table/cpu.ts"
import { fmt, type Measure, MiB } from "./table/measure.ts"

export interface ApiReadOptions {
  readonly duration: number
  readonly connections: number
  /** Reads after the restart before the RSS sample. */
  readonly reads: number
  /** Measured loads of each side, in turns; the round with the median ratio is reported. */
  readonly rounds: number
}

export interface ApiReadResult {
  readonly options: ApiReadOptions
  readonly bare: Result
  readonly grove: Result
  /** V8 heap bytes allocated per request during the measured loads. */
  readonly bareAllocPerRequest: number
  readonly groveAllocPerRequest: number
  /** CPU time (user + system, from /proc) per request during the measured loads, in µs. */
  readonly bareCpuPerRequest: number
  readonly groveCpuPerRequest: number
  /** RSS in bytes. */
  readonly bareRss: number
  readonly firstBootRss: number
  readonly afterLoadRss: number
  readonly restartRss: number
  readonly afterReadsRss: number
  /** Per round: Grove's req/s over bare's, and Grove's CPU per request over bare's (the rows' spread). */
  readonly roundRatios: ReadonlyArray<number>
  readonly roundCpuRatios: ReadonlyArray<number>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const startBare = (body: string, env: NodeJS.ProcessEnv) =>
  new Promise<{ url: string; pid: number; stop: () => void }>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(import.meta.dirname, "bare-server.ts"), body], { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, ...env } })
    child.stdout.on("data", (d: Buffer) => {
      const match = /listening on (\S+)/.exec(d.toString())
      if (match) resolve({ url: match[1]!, pid: child.pid!, stop: () => child.kill("SIGTERM") })
    })
    child.on("error", reject)
  })

/** A user and a repository to read; answers the request headers, the URL path and the body a read answers. */
const prepare = async (server: GroveServer, key: string) => {
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
  const created = await fetch(`${server.url}/api/repos`, {
    method: "POST",
    headers,
    body: JSON.stringify({ name: "bench-repo", description: "benchmark repository" })
  })
  if (created.status !== 201 && created.status !== 202) throw new Error(`create failed: ${created.status} ${await created.text()}`)
  return { headers, target: "/api/bench/bench-repo" }
}

const readBody = async (url: string, headers: Record<string, string>) => {
  for (let i = 0; ; i++) {
    const sample = await fetch(url, { headers })
    const body = await sample.text()
    if (sample.status === 200) return body
    if (i > 100) throw new Error(`read failed: ${sample.status} ${body}`)
    await sleep(100)
  }
}

/** A measured load with the allocation window open on `pid`; answers the load, the bytes allocated and the CPU ms used. */
const loadCounted = async (pid: number, file: string, url: string, headers: Record<string, string>, options: Parameters<typeof load>[2]) => {
  const stop = allocWindow(pid, file)
  const cpuBefore = snapshot([pid]).nodes.get(pid) ?? 0
  const result = await load(url, headers, options)
  const cpuMs = (snapshot([pid]).nodes.get(pid) ?? 0) - cpuBefore
  return { result, bytes: await stop(), cpuMs }
}

/** The embedded server against bare node:http, then the same data directory after a restart. */
export const measureApiRead = async (options: ApiReadOptions): Promise<ApiReadResult> => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-"))
  const probe = path.join(dataDir, "..", `${path.basename(dataDir)}.alloc.json`)
  const env = allocProbeEnv(probe)
  // The server logs to a file, as a deployment does: this process generates the load, and reading the
  // access log through a pipe cost it ~32 µs of CPU per request (the bare server logs nothing).
  const logFile = path.join(dataDir, "..", `${path.basename(dataDir)}.log`)
  const sized = { connections: options.connections, duration: options.duration }
  let server = await startServer({ dataDir, env, logFile })
  try {
    const key = await server.createUser("bench")
    const { headers, target } = await prepare(server, key)
    const body = await readBody(`${server.url}${target}`, headers)
    await sleep(1000)
    const firstBootRss = rssOf(server.process.pid!)

    // Warm both up, then measure the baseline and Grove in turns, `rounds` times: a change of the
    // machine's load during the run then hits both sides; the round with the median ratio is kept.
    const bare = await startBare(body, env)
    const url = `${server.url}${target}`
    const rounds: Array<{ bare: Result; grove: Result }> = []
    const roundCpuRatios: Array<number> = []
    let bareRss: number
    let bareBytes = 0
    let groveBytes = 0
    let bareCpuMs = 0
    let groveCpuMs = 0
    try {
      await load(bare.url, headers, sized)
      bareRss = rssOf(bare.pid)
      await load(url, headers, sized)
      for (let i = 0; i < options.rounds; i++) {
        const b = await loadCounted(bare.pid, probe, bare.url, headers, sized)
        const g = await loadCounted(server.process.pid!, probe, url, headers, sized)
        bareBytes += b.bytes
        groveBytes += g.bytes
        bareCpuMs += b.cpuMs
        groveCpuMs += g.cpuMs
        rounds.push({ bare: b.result, grove: g.result })
        roundCpuRatios.push((g.cpuMs / Math.max(1, g.result.total)) / (b.cpuMs / Math.max(1, b.result.total)))
      }
    } finally {
      bare.stop()
    }
    const ratio = (r: { bare: Result; grove: Result }) => r.grove.rps / r.bare.rps
    const median = [...rounds].sort((a, b) => ratio(a) - ratio(b))[Math.floor(rounds.length / 2)]!
    const total = (side: "bare" | "grove") => Math.max(1, rounds.reduce((n, r) => n + r[side].total, 0))
    const bareResult = { result: median.bare, perRequest: bareBytes / total("bare") }
    const groveResult = { result: median.grove, perRequest: groveBytes / total("grove") }
    const afterLoadRss = rssOf(server.process.pid!)

    await server.stop()
    server = await startServer({ dataDir, env, logFile })
    await readBody(`${server.url}${target}`, headers)
    await sleep(1000)
    const restartRss = rssOf(server.process.pid!)
    await load(`${server.url}${target}`, headers, { connections: options.connections, duration: 0, amount: options.reads })
    const afterReadsRss = rssOf(server.process.pid!)
    return {
      options,
      bare: bareResult.result,
      grove: groveResult.result,
      bareAllocPerRequest: bareResult.perRequest,
      groveAllocPerRequest: groveResult.perRequest,
      bareCpuPerRequest: (bareCpuMs * 1000) / total("bare"),
      groveCpuPerRequest: (groveCpuMs * 1000) / total("grove"),
      bareRss,
      firstBootRss,
      afterLoadRss,
      restartRss,
      afterReadsRss,
      /** Grove's req/s over bare's in each round: the read row's spread. */
      roundRatios: rounds.map(ratio),
      roundCpuRatios
    }
  } finally {
    await server.stop()
    fs.rmSync(dataDir, { recursive: true, force: true })
    fs.rmSync(probe, { force: true })
    fs.rmSync(logFile, { force: true })
  }
}

const rssRow = (id: string, name: string, bytes: number, bareRss: number, goal?: number): Measure => ({
  id,
  name,
  value: bytes / MiB,
  unit: "MiB",
  baselineName: "bare node:http RSS",
  baseline: bareRss / MiB,
  better: "lower",
  goal: goal === undefined ? "-" : `< ${goal} MiB`,
  met: goal === undefined ? undefined : bytes / MiB < goal
})

export const apiReadMeasures = (r: ApiReadResult): Array<Measure> => [
  {
    id: "read.rps",
    name: `GET /api/{o}/{n} req/s, c=${r.options.connections}`,
    value: r.grove.rps,
    unit: "req/s",
    baselineName: "bare node:http",
    baseline: r.bare.rps,
    better: "higher",
    goal: ">= 0.5x",
    met: r.grove.rps / r.bare.rps >= 0.5,
    samples: { ratios: r.roundRatios },
    detail: `p50 ${r.grove.p50} ms (bare ${r.bare.p50} ms); V8 heap allocated per request ${(r.groveAllocPerRequest / 1024).toFixed(1)} KiB (bare ${(r.bareAllocPerRequest / 1024).toFixed(1)} KiB); CPU per request ${r.groveCpuPerRequest.toFixed(0)} µs (bare ${r.bareCpuPerRequest.toFixed(0)} µs); non-2xx ${r.grove.non2xx}`
  },
  {
    // CPU per request swings less with the machine's load than req/s does (both sides are throttled alike).
    id: "read.cpu",
    name: "GET /api/{o}/{n} server CPU per request",
    value: r.groveCpuPerRequest,
    unit: "µs",
    baselineName: "bare node:http",
    baseline: r.bareCpuPerRequest,
    better: "lower",
    goal: "-",
    met: undefined,
    samples: { ratios: r.roundCpuRatios }
  },
  rssRow("rss.first-boot", "embedded RSS idle after first boot", r.firstBootRss, r.bareRss),
  rssRow("rss.restart", "embedded RSS idle after a restart", r.restartRss, r.bareRss, 200),
  rssRow("rss.reads", `embedded RSS after ${r.options.reads / 1000}k reads (restarted)`, r.afterReadsRss, r.bareRss)
]

const printEmbedded = (r: ApiReadResult) => {
  const { connections, duration } = r.options
  console.log(`GET /api/{owner}/{name}, personal key, ${connections} connections, ${duration} s${r.options.rounds > 1 ? ` (the median of ${r.options.rounds} rounds)` : ""}, embedded mode`)
  console.log(line("bare node:http", r.bare))
  console.log(line("grove", r.grove))
  console.log(`ratio grove/bare: ${(r.grove.rps / r.bare.rps).toFixed(2)}x (target >= 0.5x)`)
  console.log(`V8 heap allocated per request: grove ${(r.groveAllocPerRequest / 1024).toFixed(1)} KiB, bare ${(r.bareAllocPerRequest / 1024).toFixed(1)} KiB`)
  // CPU per request holds better than req/s on a loaded machine: it does not count time waiting for a core.
  console.log(`CPU per request (user + system): grove ${r.groveCpuPerRequest.toFixed(0)} µs, bare ${r.bareCpuPerRequest.toFixed(0)} µs (${(r.groveCpuPerRequest / r.bareCpuPerRequest).toFixed(1)}x)`)
  console.log(`server RSS: idle ${fmt(r.firstBootRss / MiB)} MiB (first boot), after load ${fmt(r.afterLoadRss / MiB)} MiB; ` +
    `after a restart idle ${fmt(r.restartRss / MiB)} MiB, after ${r.options.reads} reads ${fmt(r.afterReadsRss / MiB)} MiB; bare node:http ${fmt(r.bareRss / MiB)} MiB`)
  if (r.grove.non2xx > 0 || r.grove.errors > 0) process.exitCode = 1
}

/** Cluster mode: the same read spread over N nodes, one load per node at once; CPU per read from /proc. */
const clusterRun = async (nodeCount: number, options: ApiReadOptions) => {
  const infra = await startClusterInfra()
  const nodes: Array<GroveServer> = []
  try {
    const key = await createClusterUser(infra, "bench")
    for (let i = 0; i < nodeCount; i++) nodes.push(await startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "30000" }, args: ["--node-id", `bench-${i + 1}`] }))
    const { headers, target } = await prepare(nodes[0]!, key)
    for (const node of nodes) await readBody(`${node.url}${target}`, headers)
    // One load per node, each in a worker thread of its own, so the load generator can use every core.
    const each = { connections: Math.max(1, Math.round(options.connections / nodeCount)), duration: options.duration, workers: 1 }
    await Promise.all(nodes.map((node) => load(`${node.url}${target}`, headers, each)))
    const { result, cpu } = await cpuDuring(nodes.map((n) => n.process.pid!), () => Promise.all(nodes.map((node) => load(`${node.url}${target}`, headers, each))))
    console.log(`GET /api/{owner}/{name}, ${nodeCount} node(s) in cluster mode, ${each.connections} connections per node, ${options.duration} s, on ${os.cpus().length} cores`)
    result.forEach((r, i) => console.log(line(`node ${i + 1}`, r)))
    for (const text of costReport(cpu, result.reduce((s, r) => s + r.total, 0), "read", result.map((r) => r.total))) console.log(text)
    if (result.some((r) => r.non2xx > 0 || r.errors > 0)) process.exitCode = 1
  } finally {
    for (const node of nodes) await node.stop()
    await infra.close()
  }
}

if (import.meta.main) {
  const options = { duration: numberArg("duration", 10), connections: numberArg("connections", 64), reads: numberArg("reads", 10_000), rounds: numberArg("rounds", 1) }
  const nodeCount = numberArg("nodes", 0)
  if (nodeCount > 0) await clusterRun(nodeCount, options)
  else printEmbedded(await measureApiRead(options))
}
