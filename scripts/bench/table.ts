/**
 * `npm run bench`: every benchmark at a reduced but meaningful size, one after another (never in
 * parallel: they would skew each other), and one table: each measure, its baseline measured in
 * the same run, the ratio, the goal, met or not, and the change against the last table
 * (scripts/bench/baseline.json; a row more than 20% worse is marked REGRESSION and the exit code
 * is 1). The `bench:*` scripts run the same measurements at full size.
 *
 *   npm run bench [-- --update-baseline] [--only read,memory,merge,webhooks,ci,content,push20k]
 */
import { execFileSync } from "node:child_process"
import * as os from "node:os"
import { apiReadMeasures, measureApiRead } from "./api-read.ts"
import { ciMeasures, measureCi } from "./ci.ts"
import { CLI_PUSH_TABLE, cliPushMeasures, measureCliPushRows } from "./cli-push-rows.ts"
import { measureContent } from "./content/main.ts"
import { contentMeasures } from "./content/measures.ts"
import { cleanupAll } from "./content/procs.ts"
import { MIB } from "./content/tree.ts"
import { measureMerges, mergeMeasures } from "./merge/main.ts"
import { readBaseline, renderTable, TOLERANCE, writeBaseline } from "./table/baseline.ts"
import type { Measure } from "./table/measure.ts"
import { idleMemoryMeasures, measureIdleMemory } from "./table/memory.ts"
import { measureWebhooks, webhookMeasures } from "./webhooks.ts"

/** The reduced sizes (the full ones are the `bench:*` defaults). */
const SIZES = {
  read: { duration: 3, connections: 64, reads: 10_000, rounds: 3 },
  // First boots and restarts in turns, each idle a few seconds: ~1 min.
  memory: { samples: 3 },
  merge: { merges: 25, treeFiles: [1_000, 5_000] },
  webhooks: { events: 15 },
  // 15 latency samples a side: with 6 the p50's interval was the whole range.
  ci: { runs: 15, throughput: 12 },
  // Three rounds of push and clone (git and grove in turns) for the rows' spread, within ~3 min, then six clone pairs
  // back to back (~30 s): the clone rows' medians of nine, steadier against the host's spells of steal.
  content: { spec: { files: 5_000, totalBytes: 50 * MIB, bigBytes: 12 * MIB, seed: 0x5eed_2024 }, runs: 3, budgetMs: 180_000, packed: false, clonePairs: 6 },
  // The 20k no-op and one-file push goals, unwatched and watched: three rounds each (cli-push-rows.ts).
  push20k: CLI_PUSH_TABLE
}

const REPLACED = new Set(["rss.first-boot", "rss.restart"])

/**
 * What the CI memory row measures: bench:ci's server with 20 runners on a fresh data directory, so a first
 * boot; its idle RSS is the row's baseline. Since initdb runs in a child process (PgliteInit.ts) a first
 * boot idles as a restart does (before: 542-566 MiB idle, 266-270 on a restarted server).
 */
const ciServerState = (m: Measure): Measure =>
  m.id === "rss.ci20" ? { ...m, detail: `${m.detail ?? ""}; a first-boot server (initdb in a child process), idle ${m.baseline.toFixed(0)} MiB` } : m

const benches: ReadonlyArray<{ readonly name: keyof typeof SIZES; readonly run: () => Promise<Array<Measure>> }> = [
  // The read server's idle rows are taken by "memory" (sampled as bench:memory, without the read's allocation probe).
  { name: "read", run: async () => apiReadMeasures(await measureApiRead(SIZES.read)).filter((m) => !REPLACED.has(m.id)) },
  { name: "memory", run: async () => idleMemoryMeasures(await measureIdleMemory(SIZES.memory)) },
  { name: "merge", run: async () => mergeMeasures(await measureMerges(SIZES.merge)) },
  { name: "webhooks", run: async () => webhookMeasures(await measureWebhooks(SIZES.webhooks.events)) },
  { name: "ci", run: async () => ciMeasures(await measureCi(SIZES.ci)).map(ciServerState) },
  {
    name: "content",
    run: async () => {
      try {
        return contentMeasures(await measureContent(SIZES.content))
      } finally {
        await cleanupAll()
      }
    }
  },
  { name: "push20k", run: async () => cliPushMeasures(await measureCliPushRows(SIZES.push20k)) }
]

const only = (() => {
  const i = process.argv.indexOf("--only")
  return i > 0 ? new Set(process.argv[i + 1]!.split(",")) : undefined
})()
const update = process.argv.includes("--update-baseline")

const began = performance.now()
const loadBefore = os.loadavg()
const measures: Array<Measure> = []
const failed: Array<string> = []
for (const bench of benches) {
  if (only !== undefined && !only.has(bench.name)) continue
  const t0 = performance.now()
  console.error(`[bench] ${bench.name} ...`)
  try {
    measures.push(...(await bench.run()))
    console.error(`[bench] ${bench.name} done in ${((performance.now() - t0) / 1000).toFixed(0)} s`)
  } catch (error) {
    failed.push(bench.name)
    console.error(`[bench] ${bench.name} FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
  }
}

const stored = readBaseline()
const { text, regressions } = renderTable(measures, stored)
const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: import.meta.dirname }).toString().trim()
const loadAfter = os.loadavg()
const machine = `${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), load average ${loadBefore[0]!.toFixed(1)} at the start, ${loadAfter[0]!.toFixed(1)} at the end`
console.log(`\nGrove benchmark table: commit ${commit}, ${machine}, ${((performance.now() - began) / 1000).toFixed(0)} s`)
console.log(`ratio = value / baseline measured in the same run; "vs last table" compares ratios with scripts/bench/baseline.json` +
  (stored === undefined ? " (none yet)" : ` (commit ${stored.commit}, ${stored.date})`) + `; worse by more than ${TOLERANCE * 100}% is a REGRESSION\n`)
console.log(text)
if (failed.length > 0) console.log(`\nFAILED (no rows): ${failed.join(", ")}`)
if (regressions.length > 0) console.log(`\nREGRESSIONS against the last table: ${regressions.join("; ")}`)
if (update) {
  if (failed.length > 0 || only !== undefined) {
    console.log("\nbaseline NOT updated: a partial table (a benchmark failed or --only was given)")
    process.exitCode = 1
  } else {
    writeBaseline(measures, { about: "the ratios of the last `npm run bench` table; rewrite with `npm run bench -- --update-baseline`", commit, date: new Date().toISOString(), machine })
    console.log("\nscripts/bench/baseline.json rewritten from this table")
  }
} else if (failed.length > 0 || regressions.length > 0) process.exitCode = 1
