/**
 * Where an idle embedded server's memory goes, and what the server's start-up choices buy: the RSS of a
 * restarted server (the same data directory, one read, then idle) for each way to start it, measured in
 * turns in one run, with the resident memory split by kind of mapping (/proc/PID/smaps):
 * - `v8+other`: anonymous memory V8 and Node allocate themselves (the JS heap first of all);
 * - `malloc`: glibc's heap and its threads' arenas (V8 compiling PGlite's WebAssembly frees ~600 MiB there);
 * - `wasm`: PGlite's WebAssembly memory (shared_buffers lives in it); `code`: executable anonymous memory;
 * - `files`: mapped files (node's own binary first of all, shared with every node process).
 *
 *   npm run bench:memory [-- --samples 3]
 *   npm run bench:memory -- --transfer [--small]      (around a big push and clone: memory-transfer.ts)
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { run, ROOT, SERVER_BIN, startServer } from "../../test/support/GroveServer.ts"
import { numberArg } from "./load.ts"

const MiB = 1024 * 1024
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** Ways to start the server: the first is the baseline. */
const VARIANTS: ReadonlyArray<{ readonly name: string; readonly env: NodeJS.ProcessEnv }> = [
  { name: "sources, glibc's default malloc (before)", env: { GROVE_NO_BUNDLE: "1", GLIBC_TUNABLES: "" } },
  { name: "sources, fixed mmap threshold", env: { GROVE_NO_BUNDLE: "1" } },
  { name: "bundle, glibc's default malloc", env: { GROVE_BUNDLE: "1", GLIBC_TUNABLES: "" } },
  { name: "bundle, fixed mmap threshold (grove-server)", env: { GROVE_BUNDLE: "1" } }
]

export type Kind = "v8+other" | "malloc" | "wasm" | "code" | "files"

interface Mapping {
  readonly start: bigint
  readonly end: bigint
  readonly perm: string
  readonly name: string
  rss: number
}

/** Resident KiB of `pid` by kind of mapping. */
export const residentByKind = (pid: number): Record<Kind, number> => {
  const maps: Array<Mapping> = []
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (head) maps.push({ start: BigInt(`0x${head[1]}`), end: BigInt(`0x${head[2]}`), perm: head[3]!, name: head[4]!.trim(), rss: 0 })
    else if (line.startsWith("Rss:") && maps.length > 0) maps.at(-1)!.rss = Number(line.split(/\s+/)[1])
  }
  const out: Record<Kind, number> = { "v8+other": 0, malloc: 0, wasm: 0, code: 0, files: 0 }
  const arena = 64n * BigInt(MiB)
  maps.forEach((m, i) => {
    const next = maps[i + 1]
    let kind: Kind
    if (m.name === "[heap]") kind = "malloc"
    else if (m.name !== "" && !m.name.startsWith("[")) kind = "files"
    else if (m.perm.includes("x")) kind = "code"
    // A WebAssembly memory: read-write, followed at once by its guard reservation of several GiB.
    else if (next !== undefined && next.start === m.end && next.perm === "---p" && next.end - next.start >= 4n * 1024n * BigInt(MiB)) kind = "wasm"
    // glibc's thread arenas: 64 MiB aligned, at most 64 MiB.
    else if (m.start % arena === 0n && m.end - m.start <= arena) kind = "malloc"
    else kind = "v8+other"
    out[kind] += m.rss
  })
  return out
}

export const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024

export interface Sample {
  readonly rss: number
  readonly kinds: Record<Kind, number>
  readonly startMs: number
}

/** How long a server idles after its start (and read) before its memory is sampled: settled, before IdleGc's first look (10 s). */
export const SETTLE_MS = 3000

/** Starts the server on `dataDir`, reads once, waits idle, samples its memory; stops it. */
export const sample = async (dataDir: string, env: NodeJS.ProcessEnv, headers: Record<string, string>): Promise<Sample> => {
  const started = performance.now()
  const server = await startServer({ dataDir, env })
  const startMs = performance.now() - started
  try {
    const read = await fetch(`${server.url}/api/whoami`, { headers })
    if (read.status !== 200) throw new Error(`read failed: ${read.status}`)
    await sleep(SETTLE_MS)
    const pid = server.process.pid!
    return { rss: rssMiB(pid), kinds: residentByKind(pid), startMs }
  } finally {
    await server.stop()
  }
}

/** A first boot on a fresh `dataDir` (initdb) through grove-server as shipped, idle `SETTLE_MS`, sampled; stopped. */
export const sampleFirstBoot = async (dataDir: string): Promise<Sample> => {
  const started = performance.now()
  const server = await startServer({ dataDir })
  const startMs = performance.now() - started
  try {
    await sleep(SETTLE_MS)
    const pid = server.process.pid!
    return { rss: rssMiB(pid), kinds: residentByKind(pid), startMs }
  } finally {
    await server.stop()
  }
}

/** Builds the server's bundle if a source changed since: what `npm start` and the image run. */
export const bundleIfStale = async () => {
  const bundled = await run(path.join(ROOT, "packages/server/scripts/bundle.ts"), ["--if-stale"], { timeoutMs: 300_000 })
  if (bundled.stderr.includes("not bundling")) throw new Error(bundled.stderr)
}

/** A user on `dataDir` (the server stopped), and the headers to read as them. */
export const benchUser = async (dataDir: string): Promise<Record<string, string>> => {
  const created = await run(SERVER_BIN, ["user", "create", "bench", "--data-dir", dataDir])
  if (created.code !== 0) throw new Error(created.stderr)
  return { authorization: `Bearer ${created.stdout.trim().split("\n").at(-1)!}` }
}

if (import.meta.main && process.argv.includes("--transfer")) await (await import("./memory-transfer.ts")).main()
else if (import.meta.main) {
  const samples = numberArg("samples", 3)
  await bundleIfStale()
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-memory-"))
  try {
    // First boot (initdb) through grove-server as shipped, then a user to read as.
    const firsts = [await sampleFirstBoot(dataDir)]
    const headers = await benchUser(dataDir)

    const results = VARIANTS.map(() => [] as Array<Sample>)
    // In turns, so a change of the machine's load hits every variant.
    for (let round = 0; round < samples; round++) {
      for (const [i, variant] of VARIANTS.entries()) results[i]!.push(await sample(dataDir, variant.env, headers))
      // More first boots, each on a directory of its own, in the same turns.
      if (round > 0) {
        const fresh = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-memory-"))
        firsts.push(await sampleFirstBoot(fresh).finally(() => fs.rmSync(fresh, { recursive: true, force: true })))
      }
    }
    const fmt = (n: number) => n.toFixed(1).padStart(6)
    const kinds = (k: Record<Kind, number>) => (Object.entries(k) as Array<[Kind, number]>).map(([name, kib]) => `${name} ${fmt(kib / 1024)}`).join("  ")
    console.log(`embedded server idle RSS (MiB), ${samples} restart(s) each, in turns; load ${os.loadavg()[0]!.toFixed(1)}`)
    const medianOf = (rs: ReadonlyArray<Sample>) =>
      Object.fromEntries((Object.keys(rs[0]!.kinds) as Array<Kind>).map((k) => [k, median(rs.map((s) => s.kinds[k]))])) as Record<Kind, number>
    console.log(`${"first boot (grove-server as shipped)".padEnd(46)} ${fmt(median(firsts.map((s) => s.rss)))} (${firsts.map((s) => s.rss.toFixed(0)).join(", ")})  ` +
      `start ${median(firsts.map((s) => s.startMs)).toFixed(0)} ms   ${kinds(medianOf(firsts))}`)
    const baseline = median(results[0]!.map((s) => s.rss))
    for (const [i, variant] of VARIANTS.entries()) {
      const rs = results[i]!
      const rss = median(rs.map((s) => s.rss))
      const medianKinds = medianOf(rs)
      console.log(`${variant.name.padEnd(46)} ${fmt(rss)} (${rs.map((s) => s.rss.toFixed(0)).join(", ")}; ${(rss / baseline).toFixed(2)}x)  ` +
        `start ${median(rs.map((s) => s.startMs)).toFixed(0)} ms   ${kinds(medianKinds)}`)
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}
