/** The content benchmark's rows of the table (`npm run bench`): Grove against git in the same run. */
import type { Measure } from "../table/measure.ts"
import { type ContentResult, SETTLED_MS } from "./main.ts"
import { fmtBytes, fmtMs } from "./report.ts"
import { MIB } from "./tree.ts"

const vsGit = (
  id: string,
  name: string,
  git: number,
  grove: number,
  unit: "ms" | "MiB",
  goal: { ratio?: number; limit?: number },
  detail: string | undefined,
  ratios: ReadonlyArray<number>
): Measure => ({
  id,
  name,
  value: grove,
  unit,
  baselineName: unit === "ms" ? "git" : "git's bytes",
  baseline: git,
  better: "lower",
  goal: goal.ratio !== undefined ? `<= ${goal.ratio.toFixed(1)}x` : `< ${goal.limit} ${unit}`,
  met: goal.ratio !== undefined ? grove / git <= goal.ratio : grove < goal.limit!,
  ...(detail === undefined ? {} : { detail }),
  samples: { ratios }
})

/** CPU of both ends: git's client and http-backend against grove's client and server; no goal of its own. */
const cpuRow = (id: string, name: string, cpu: ContentResult["cpu"]["push"]): Measure => ({
  id,
  name,
  value: cpu.grove,
  unit: "ms",
  baselineName: "git client + http-backend CPU",
  baseline: cpu.git,
  better: "lower",
  goal: "-",
  met: undefined,
  detail: "grove client + server CPU; swings less with the machine's load than the time rows",
  samples: { ratios: cpu.ratios }
})

export const contentMeasures = (r: ContentResult): Array<Measure> => {
  const size = `${(r.files / 1000).toFixed(0)}k files / ${(r.totalBytes / MIB).toFixed(0)} MiB`
  return [
    vsGit("push.time", `push of ${size}, time`, r.push.git, r.push.grove, "ms", { ratio: 0.8 }, `git ${fmtMs(r.push.git)}, grove ${fmtMs(r.push.grove)}`, r.push.ratios),
    vsGit("push.bytes", `push of ${size}, bytes sent`, r.push.gitBytes / MIB, r.push.groveBytes / MIB, "MiB", { ratio: 1.0 }, `git ${fmtBytes(r.push.gitBytes)}, grove ${fmtBytes(r.push.groveBytes)}`, r.push.byteRatios),
    vsGit("clone.time", `clone of ${size}, time`, r.clone.git, r.clone.grove, "ms", { ratio: 0.8 }, `git ${fmtMs(r.clone.git)}, grove ${fmtMs(r.clone.grove)}`, r.clone.ratios),
    vsGit("clone.bytes", `clone of ${size}, bytes received (zstd asked)`, r.clone.gitBytes / MIB, r.clone.zstdBytes / MIB, "MiB", { ratio: 1.0 },
      `git ${fmtBytes(r.clone.gitBytes)}, grove ${fmtBytes(r.clone.zstdBytes)} asking zstd as from a remote server (${fmtBytes(r.clone.groveBytes)} raw in the timed loopback clones)`, [r.clone.zstdBytes / r.clone.gitBytes]),
    cpuRow("push.cpu", `push of ${size}, CPU`, r.cpu.push),
    cpuRow("clone.cpu", `clone of ${size}, CPU`, r.cpu.clone),
    vsGit("push.noop", `no-op push at ${size}`, r.noop.git, r.noop.grove, "ms", { limit: 100 }, "median of 3; the goal is for 20k files", r.noop.ratios),
    vsGit("push.one-file", `one-file push at ${size}`, r.oneFile.git, r.oneFile.grove, "ms", { limit: 300 }, "median of 3; the goal is for 20k files", r.oneFile.ratios),
    {
      id: "rss.clone-peak",
      name: `embedded RSS during a clone of ${size}`,
      value: r.cloneRss.peak / MIB,
      unit: "MiB",
      baselineName: "the same server before the clone",
      baseline: r.cloneRss.before / MIB,
      better: "lower",
      goal: "growth < 64 MiB",
      met: r.cloneRss.peak - r.cloneRss.before < 64 * MIB
    },
    {
      id: "rss.clone-after",
      name: `embedded RSS after the clone (settled, ${SETTLED_MS / 1000} s)`,
      value: r.cloneRss.after / MIB,
      unit: "MiB",
      baselineName: "the same server before the clone",
      baseline: r.cloneRss.before / MIB,
      better: "lower",
      goal: "< 200 MiB",
      met: r.cloneRss.after < 200 * MIB,
      detail: `${SETTLED_MS / 1000} s after the clone returned; ${(r.cloneRss.rightAfter / MIB).toFixed(0)} MiB right after it`
    }
  ]
}
