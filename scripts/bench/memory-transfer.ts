/**
 * An embedded server's memory around big transfers, as issue 24 asks: RSS idle after a restart, after 10k
 * reads, after a push of the content benchmark's tree (20,000 files, 200 MiB), during a clone of it (peak),
 * after it and a minute later, and idle after another restart; each with the resident memory by kind of mapping
 * (memory.ts's `residentByKind`). "After" is the lowest of a few samples over 3 s (a transfer's garbage
 * may still await collection). The server runs as shipped (`grove-server`, the bundle).
 *
 *   npm run bench:memory -- --transfer [--small] [--env NAME=VALUE ...]   (--env: e.g. a setting to compare)
 *   node scripts/bench/memory-transfer.ts [same options] [--heap-snapshots DIR]   (idle, after the push, after the clone)
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { CLI_BIN, type GroveServer, ROOT, run, SERVER_BIN, startServer } from "../../test/support/GroveServer.ts"
import { residentByKind, type Kind } from "./memory.ts"
import { ensureTree, FULL_SPEC, SMALL_SPEC } from "./content/tree.ts"
import { cpuOf, sampleRss } from "./content/procs.ts"

const MiB = 1024 * 1024
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024
const fmt = (n: number) => n.toFixed(1).padStart(6)
const kinds = (k: Record<Kind, number>) => (Object.entries(k) as Array<[Kind, number]>).map(([name, kib]) => `${name} ${fmt(kib / 1024)}`).join("  ")

/** The lowest RSS over ~3 s, with its breakdown. */
const settled = async (pid: number) => {
  let best = { rss: Infinity, kinds: residentByKind(pid) }
  for (let i = 0; i < 6; i++) {
    await sleep(500)
    const rss = rssMiB(pid)
    if (rss < best.rss) best = { rss, kinds: residentByKind(pid) }
  }
  return best
}

/** Asks `pid` (started with --heapsnapshot-signal=SIGUSR2) for a heap snapshot into `dir`; waits for it. */
const heapSnapshot = async (pid: number, dir: string, label: string) => {
  const before = new Set(fs.readdirSync(dir))
  process.kill(pid, "SIGUSR2")
  const deadline = Date.now() + 300_000
  for (;;) {
    const made = fs.readdirSync(dir).find((name) => !before.has(name) && name.endsWith(".heapsnapshot"))
    // Written in one go: complete once its size stops changing.
    if (made !== undefined) {
      const size = fs.statSync(path.join(dir, made)).size
      await sleep(2000)
      if (size > 0 && fs.statSync(path.join(dir, made)).size === size) {
        fs.renameSync(path.join(dir, made), path.join(dir, `${label}.heapsnapshot`))
        return
      }
    } else if (Date.now() > deadline) throw new Error("no heap snapshot")
    else await sleep(500)
  }
}

export const measureTransferMemory = async (options: { readonly small: boolean; readonly env: NodeJS.ProcessEnv; readonly snapshots?: string | undefined }) => {
  const spec = options.small ? SMALL_SPEC : FULL_SPEC
  const tree = ensureTree(spec, (line) => console.error(line))
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-memory-transfer-"))
  const dataDir = path.join(tmp, "data")
  // The bundle as built even if sources are edited meanwhile (the caller bundled it).
  const env = {
    GROVE_BUNDLE: "1",
    ...(options.snapshots === undefined ? {} : { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${options.snapshots}` }),
    ...options.env
  }
  const snapshot = (pid: number, label: string) => options.snapshots === undefined ? undefined : heapSnapshot(pid, options.snapshots, label)
  const rows: Array<string> = []
  const row = (label: string, rss: number, k?: Record<Kind, number>) => {
    const line = `${label.padEnd(34)} ${fmt(rss)}${k === undefined ? "" : `   ${kinds(k)}`}`
    rows.push(line)
    console.error(line)
  }
  let server: GroveServer | undefined
  try {
    server = await startServer({ dataDir, env })
    await server.stop()
    const created = await run(SERVER_BIN, ["user", "create", "bench", "--data-dir", dataDir])
    if (created.code !== 0) throw new Error(created.stderr)
    const key = created.stdout.trim().split("\n").at(-1)!
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }

    server = await startServer({ dataDir, env })
    const pid = server.process.pid!
    const made = await fetch(`${server.url}/api/repos`, { method: "POST", headers, body: JSON.stringify({ name: "reads" }) })
    if (![201, 202].includes(made.status)) throw new Error(`repository: ${made.status}`)
    const idle = await settled(pid)
    row("idle after a restart", idle.rss, idle.kinds)
    await snapshot(pid, "1-idle")

    // 10k reads of a repository, 8 at a time.
    let next = 0
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next++ < 10_000) {
        const response = await fetch(`${server!.url}/api/bench/reads`, { headers })
        if (response.status !== 200) throw new Error(`read: ${response.status}`)
        await response.arrayBuffer()
      }
    }))
    const reads = await settled(pid)
    row("after 10k reads", reads.rss, reads.kinds)

    const checkout = path.join(tmp, "checkout")
    fs.cpSync(tree.dir, checkout, { recursive: true })
    const grove = async (args: ReadonlyArray<string>, cwd: string) => {
      const ran = await run(CLI_BIN, args, { cwd, env: { SERVICE_API_KEY: key, GROVE_REMOTE: server!.url }, timeoutMs: 1_200_000 })
      if (ran.code !== 0) throw new Error(`grove ${args.join(" ")}: ${ran.stderr}`)
      return JSON.parse(ran.stdout) as Record<string, unknown>
    }
    const init = await grove(["init", "--owner", "bench", "--name", "tree", "--json"], checkout)
    await grove(["commit", "--json"], checkout)
    const pushSampling = sampleRss(pid)
    const pushCpu = cpuOf(pid)
    await grove(["push", "--json"], checkout)
    const push = pushSampling()
    row(`push ${spec.files} files: peak`, push.peak / MiB)
    rows.push(`  server CPU of the push: ${cpuOf(pid) - pushCpu} ms`)
    const pushed = await settled(pid)
    row("after the push", pushed.rss, pushed.kinds)
    await snapshot(pid, "2-pushed")

    const cloneSampling = sampleRss(pid)
    const cloneCpu = cpuOf(pid)
    await grove(["clone", "bench/tree", path.join(tmp, "clone"), "--branch", String(init["branch"]), "--json"], tmp)
    const clone = cloneSampling()
    row("during the clone: peak", clone.peak / MiB)
    rows.push(`  server CPU of the clone: ${cpuOf(pid) - cloneCpu} ms`)
    const cloned = await settled(pid)
    row("after the clone", cloned.rss, cloned.kinds)
    await snapshot(pid, "3-cloned")
    // Idle: the server's idle collection (ops/IdleGc.ts) collects 4-6 s after a transfer, then malloc_trim gives
    // malloc's free pages back (--env GROVE_MALLOC_TRIM=0 leaves the trim out).
    await sleep(60_000)
    const later = await settled(pid)
    row("a minute after the clone", later.rss, later.kinds)
    await server.stop()

    server = await startServer({ dataDir, env })
    const restarted = await settled(server.process.pid!)
    row("idle after another restart", restarted.rss, restarted.kinds)
    await server.stop()
    server = undefined
    return rows
  } finally {
    await server?.stop()
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

/** `npm run bench:memory -- --transfer` (memory.ts hands over). */
export const main = async () => {
  const env = Object.fromEntries(process.argv.flatMap((arg, i) => process.argv[i - 1] === "--env" ? [arg.split(/=(.*)/s).slice(0, 2)] : []))
  const bundled = await run(path.join(ROOT, "packages/server/scripts/bundle.ts"), ["--if-stale"], { timeoutMs: 300_000 })
  if (bundled.stderr.includes("not bundling")) throw new Error(bundled.stderr)
  console.error(`load ${os.loadavg()[0]!.toFixed(1)}; env ${JSON.stringify(env)}`)
  const at = process.argv.indexOf("--heap-snapshots")
  const snapshots = at > 0 ? path.resolve(process.argv[at + 1]!) : undefined
  if (snapshots !== undefined) fs.mkdirSync(snapshots, { recursive: true })
  const rows = await measureTransferMemory({ small: process.argv.includes("--small"), env, snapshots })
  console.log(`embedded server RSS (MiB) around transfers; env ${JSON.stringify(env)}; load ${os.loadavg()[0]!.toFixed(1)}`)
  for (const line of rows) console.log(line)
}

if (import.meta.main) await main()
