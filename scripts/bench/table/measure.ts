/**
 * One row of the benchmark table, as every benchmark reports it: the measure, the baseline
 * measured in the same run on the same machine, their ratio, the goal and whether it is met.
 * Timings on a shared machine swing with its load; the ratio to a same-run baseline swings less,
 * so the ratio is what `npm run bench` compares with the last table (scripts/bench/baseline.json).
 */
export interface Measure {
  /** Stable key of the row in baseline.json. */
  readonly id: string
  readonly name: string
  readonly value: number
  readonly unit: string
  /** What the baseline is, e.g. "bare node:http" or "git push". */
  readonly baselineName: string
  /** The baseline measured in the same run, in the same unit. */
  readonly baseline: number
  /** Which way the value (and so the ratio value/baseline) is better. */
  readonly better: "higher" | "lower"
  /** The goal as text, e.g. ">= 0.5x" or "< 200 MiB". */
  readonly goal: string
  /** Whether the goal is met, judged on the value or the ratio as the goal says; undefined when the row has no goal. */
  readonly met: boolean | undefined
  /** Extra numbers of the row (p50, bytes on the wire, allocation per request, ...). */
  readonly detail?: string
}

export const ratioOf = (m: Pick<Measure, "value" | "baseline">) => (m.baseline === 0 ? Number.NaN : m.value / m.baseline)

/** The p-th percentile (0..1) of the values, nearest rank. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? Number.NaN
}

export const MiB = 1024 * 1024
export const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a")

