/**
 * The table's rows for issue 24's goals at 20,000 files (`npm run bench`): the no-op push (< 100 ms) and the one-file
 * push (< 300 ms), each without and with the checkout's watcher (`grove watch start`), against git's in the same rounds
 * (`git push` of nothing; `git push` of one commit changing one file). From `cli-push.ts`'s rounds, pushes only.
 */
import { type CliPushResult, measureCliPush, type Sample } from "./cli-push.ts"
import { fmtMs, median } from "./content/report.ts"
import { cleanupAll } from "./content/procs.ts"
import { MIB } from "./content/tree.ts"
import type { Measure } from "./table/measure.ts"

/**
 * The table's size: one checkout of 20k files per client (unwatched, watched), three rounds of each push in turns. The
 * goals are about the file count; 40 MiB rather than the content benchmark's 200 MiB keeps the first pushes (hashing,
 * uploading) that the rounds need from taking most of the row's time.
 */
export const CLI_PUSH_TABLE = { files: 20_000, totalBytes: 40 * MIB, runs: 3 } as const

export const measureCliPushRows = async (
  size: { readonly files: number; readonly totalBytes?: number; readonly runs: number } = CLI_PUSH_TABLE
): Promise<CliPushResult> => {
  try {
    return await measureCliPush({ ...size, watch: true, ops: ["no-op push", "one-file push"] })
  } finally {
    await cleanupAll()
  }
}

const walls = (xs: ReadonlyArray<Sample>) => xs.map((s) => s.ms)

export const cliPushMeasures = (r: CliPushResult): Array<Measure> => {
  const size = `${(r.files / 1000).toFixed(0)}k files / ${(r.totalBytes / MIB).toFixed(0)} MiB`
  const row = (id: string, op: "no-op push" | "one-file push", client: string, limitMs: number): Measure => {
    const git = r.samples.get(`git ${op}`) ?? []
    const grove = r.samples.get(`${client} ${op}`) ?? []
    const value = median(walls(grove))
    const cpu = (xs: ReadonlyArray<Sample>) => fmtMs(median(xs.map((s) => s.cpuMs)))
    return {
      id,
      name: `${op} at ${size}${client === "grove (watch)" ? ", watched (grove watch)" : ""}, time`,
      value,
      unit: "ms",
      baselineName: "git",
      baseline: median(walls(git)),
      better: "lower",
      goal: `< ${limitMs} ms`,
      met: value < limitMs,
      detail: `median of ${grove.length} (${walls(grove).map((ms) => ms.toFixed(0)).join(", ")} ms); client CPU: grove ${cpu(grove)}, git ${
        cpu(git)
      } (10 ms ticks); load per round ${r.loads.map((l) => l.split(" ")[0]).join(", ")}`,
      // One ratio per round: grove and git in the same turn.
      samples: { ratios: grove.map((s, i) => s.ms / (git[i]?.ms ?? Number.NaN)).filter(Number.isFinite) }
    }
  }
  return [
    row("push20k.noop", "no-op push", "grove", 100),
    row("push20k.noop-watched", "no-op push", "grove (watch)", 100),
    row("push20k.one-file", "one-file push", "grove", 300),
    row("push20k.one-file-watched", "one-file push", "grove (watch)", 300)
  ]
}
