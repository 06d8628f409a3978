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
  /**
   * The samples behind value and baseline, when the row has several: the ratio's spread comes from
   * them (`ratioInterval`), and a change within it is never called a regression. Either per-side
   * samples whose medians are value and baseline (`inverse`: samples are times per operation of a
   * rate row, so the rate ratio is baseline / value of them), or one ratio per paired round.
   */
  readonly samples?:
    | { readonly value: ReadonlyArray<number>; readonly baseline: ReadonlyArray<number>; readonly inverse?: boolean }
    | { readonly ratios: ReadonlyArray<number> }
}

export const ratioOf = (m: Pick<Measure, "value" | "baseline">) => (m.baseline === 0 ? Number.NaN : m.value / m.baseline)

/** The p-th percentile (0..1) of the values, nearest rank. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? Number.NaN
}

/** The median's interval at ~95% by order statistics (no distribution assumed); the whole range under 6 samples. */
export const medianInterval = (values: ReadonlyArray<number>): readonly [number, number] => {
  const sorted = [...values].sort((a, b) => a - b)
  const n = sorted.length
  const k = n < 6 ? 0 : Math.max(0, Math.floor((n - 1.96 * Math.sqrt(n)) / 2))
  return [sorted[k] ?? Number.NaN, sorted[n - 1 - k] ?? Number.NaN]
}

/** Samples per side of a row (the smaller side), or undefined when it has none. */
export const sampleCount = (m: Pick<Measure, "samples">): number | undefined =>
  m.samples === undefined ? undefined : "ratios" in m.samples ? m.samples.ratios.length : Math.min(m.samples.value.length, m.samples.baseline.length)

/**
 * Where the row's ratio lies given its samples: the ratios' median interval, or the quotient of the
 * two sides' median intervals (wide on purpose: both sides swing). Always holds the row's own ratio.
 */
export const ratioInterval = (m: Pick<Measure, "value" | "baseline" | "samples">): readonly [number, number] | undefined => {
  const s = m.samples
  if (s === undefined || (sampleCount(m) ?? 0) < 2) return undefined
  let lo: number, hi: number
  if ("ratios" in s) [lo, hi] = medianInterval(s.ratios)
  else {
    const [vLo, vHi] = medianInterval(s.value)
    const [bLo, bHi] = medianInterval(s.baseline)
    ;[lo, hi] = s.inverse === true ? [bLo / vHi, bHi / vLo] : [vLo / bHi, vHi / bLo]
  }
  const r = ratioOf(m)
  return Number.isFinite(lo) && Number.isFinite(hi) ? [Math.min(lo, r), Math.max(hi, r)] : undefined
}

export const MiB = 1024 * 1024
export const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a")

