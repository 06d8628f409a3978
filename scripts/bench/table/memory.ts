/**
 * The table's idle-memory rows, sampled as `npm run bench:memory` samples (its own functions): grove-server
 * as shipped (the bundle, rebuilt if stale), no allocation probe loaded, idle `SETTLE_MS` after its start
 * (first boot) or after one read (restart). First boots and restarts in turns, `samples` of each; the
 * baseline is a bare node:http server sampled the same way (one request, then idle).
 * They replace the read benchmark's rows rss.first-boot and rss.restart (new ids: another measurement): that
 * server carries the allocation probe and was sampled 1 s after a read (204-206 MiB where bench:memory
 * measured 192), against a bare server sampled after load with the probe too.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { benchUser, bundleIfStale, rssMiB, sample, type Sample, sampleFirstBoot, SETTLE_MS } from "../memory.ts"
import { type Measure, percentile } from "./measure.ts"

export interface IdleMemoryResult {
  readonly firstBoot: ReadonlyArray<Sample>
  readonly restart: ReadonlyArray<Sample>
  /** MiB, one per round. */
  readonly bare: ReadonlyArray<number>
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A bare node:http server (bare-server.ts): one request, idle `SETTLE_MS`, its RSS in MiB. */
const sampleBare = () =>
  new Promise<number>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(import.meta.dirname, "..", "bare-server.ts"), "{}"], { stdio: ["ignore", "pipe", "inherit"] })
    child.on("error", reject)
    child.stdout.on("data", (d: Buffer) => {
      const match = /listening on (\S+)/.exec(d.toString())
      if (match === null) return
      fetch(match[1]!).then((r) => r.text()).then(() => sleep(SETTLE_MS)).then(() => resolve(rssMiB(child.pid!)), reject)
        .finally(() => child.kill("SIGTERM"))
    })
  })

export const measureIdleMemory = async (options: { readonly samples: number }): Promise<IdleMemoryResult> => {
  await bundleIfStale()
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-memory-"))
  const firstBoot: Array<Sample> = []
  const restart: Array<Sample> = []
  const bare: Array<number> = []
  try {
    firstBoot.push(await sampleFirstBoot(dataDir))
    const headers = await benchUser(dataDir)
    for (let round = 0; round < options.samples; round++) {
      bare.push(await sampleBare())
      restart.push(await sample(dataDir, {}, headers))
      if (round === 0) continue
      const fresh = fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-memory-"))
      firstBoot.push(await sampleFirstBoot(fresh).finally(() => fs.rmSync(fresh, { recursive: true, force: true })))
    }
    return { firstBoot, restart, bare }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

const row = (id: string, name: string, samples: ReadonlyArray<Sample>, bare: ReadonlyArray<number>, goal?: number): Measure => {
  const value = percentile(samples.map((s) => s.rss), 0.5)
  const wasm = percentile(samples.map((s) => s.kinds.wasm / 1024), 0.5)
  return {
    id,
    name,
    value,
    unit: "MiB",
    baselineName: "bare node:http RSS",
    baseline: percentile(bare, 0.5),
    better: "lower",
    goal: goal === undefined ? "-" : `< ${goal} MiB`,
    met: goal === undefined ? undefined : value < goal,
    samples: { value: samples.map((s) => s.rss), baseline: bare },
    detail: `as bench:memory: grove-server as shipped, idle ${SETTLE_MS / 1000} s; ${samples.map((s) => s.rss.toFixed(0)).join(", ")} MiB; ` +
      `PGlite WebAssembly ${wasm.toFixed(0)} MiB`
  }
}

export const idleMemoryMeasures = (r: IdleMemoryResult): Array<Measure> => [
  row("rss.idle.first-boot", "embedded RSS idle after first boot (as bench:memory)", r.firstBoot, r.bare),
  row("rss.idle.restart", "embedded RSS idle after a restart (as bench:memory)", r.restart, r.bare, 200)
]
