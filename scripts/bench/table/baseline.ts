/**
 * The last table's ratios (scripts/bench/baseline.json), the comparison of a new table with them
 * and the table's text. A row is a regression when its ratio (value / same-run baseline) is more
 * than 20% worse than the stored one, in the row's own direction (higher or lower is better), and
 * the change is beyond the measured spread: the ratio's interval now (from the row's samples) lies
 * wholly on the worse side of the stored interval (or of the stored ratio, for a row without one).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fmt, type Measure, ratioInterval, ratioOf, sampleCount } from "./measure.ts"

export const BASELINE_FILE = path.resolve(import.meta.dirname, "../baseline.json")
/** Worse than the stored ratio by more than this fraction is a regression. */
export const TOLERANCE = 0.2

export interface StoredRow {
  readonly ratio: number
  readonly better: "higher" | "lower"
  readonly value: number
  readonly unit: string
  /** The ratio's interval from the row's samples (`ratioInterval`), and how many there were. */
  readonly low?: number
  readonly high?: number
  readonly samples?: number
}

export interface BaselineFile {
  readonly about: string
  readonly commit: string
  readonly date: string
  readonly machine: string
  readonly rows: Readonly<Record<string, StoredRow>>
}

export const readBaseline = (file = BASELINE_FILE): BaselineFile | undefined =>
  fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as BaselineFile) : undefined

export const writeBaseline = (measures: ReadonlyArray<Measure>, meta: Omit<BaselineFile, "rows">, file = BASELINE_FILE) => {
  const rows: Record<string, StoredRow> = {}
  const p4 = (n: number) => Number(n.toPrecision(4))
  for (const m of measures) {
    if (!Number.isFinite(ratioOf(m))) continue
    const interval = ratioInterval(m)
    rows[m.id] = {
      ratio: p4(ratioOf(m)),
      better: m.better,
      value: p4(m.value),
      unit: m.unit,
      ...(interval === undefined ? {} : { low: p4(interval[0]), high: p4(interval[1]), samples: sampleCount(m)! })
    }
  }
  fs.writeFileSync(file, `${JSON.stringify({ ...meta, rows }, null, 2)}\n`)
}

export interface Comparison {
  readonly text: string
  readonly regression: boolean
}

/** How a row's ratio moved against the stored one: "+12% better", "-35% worse REGRESSION", "new". */
export const compare = (m: Measure, stored: BaselineFile | undefined): Comparison => {
  const before = stored?.rows[m.id]
  const now = ratioOf(m)
  if (before === undefined || !Number.isFinite(now) || before.ratio === 0) return { text: "new", regression: false }
  // Positive when better, in the row's direction.
  const change = m.better === "higher" ? now / before.ratio - 1 : before.ratio / now - 1
  const worse = m.better === "higher" ? now < before.ratio * (1 - TOLERANCE) : now > before.ratio * (1 + TOLERANCE)
  // Beyond the spread: the best end of the interval now is still worse than the worst end of the stored one.
  const [nowLo, nowHi] = ratioInterval(m) ?? [now, now]
  const storedLo = before.low ?? before.ratio
  const storedHi = before.high ?? before.ratio
  const beyond = m.better === "higher" ? nowHi < storedLo : nowLo > storedHi
  const regression = worse && beyond
  const pct = `${change >= 0 ? "+" : ""}${(change * 100).toFixed(0)}%`
  const was = `was ${fmt(before.ratio, 3)}x${before.low === undefined ? "" : ` [${fmt(before.low, 3)}-${fmt(before.high!, 3)}]`}`
  const mark = regression ? "  REGRESSION" : worse ? "  within spread" : ""
  return { text: `${pct} ${change >= 0 ? "better" : "worse"} (${was})${mark}`, regression }
}

/** The ratio with its interval and sample count, e.g. "0.133x [0.120-0.140] n=3". */
const ratioText = (m: Measure) => {
  const interval = ratioInterval(m)
  return `${fmt(ratioOf(m), 3)}x${interval === undefined ? "" : ` [${fmt(interval[0], 3)}-${fmt(interval[1], 3)}] n=${sampleCount(m)}`}`
}

const num = (n: number) => (Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2))

/** The table as text, and whether any row regressed. */
export const renderTable = (measures: ReadonlyArray<Measure>, stored: BaselineFile | undefined) => {
  const rows = measures.map((m) => {
    const c = compare(m, stored)
    return {
      c,
      cells: [
        m.name,
        `${num(m.baseline)} ${m.unit} (${m.baselineName})`,
        `${num(m.value)} ${m.unit}`,
        `${ratioText(m)} (${m.better} is better)`,
        m.goal,
        m.met === undefined ? "-" : m.met ? "met" : "NOT MET",
        c.text
      ],
      detail: m.detail
    }
  })
  const header = ["measure", "baseline (same run)", "value", "ratio [interval of its median] samples", "goal", "met", "vs last table"]
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r.cells[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
  const out = [line(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map((r) => line(r.cells))]
  const details = rows.filter((r) => r.detail !== undefined).map((r) => `  ${r.cells[0]}: ${r.detail}`)
  return { text: [...out, "", "details:", ...details].join("\n"), regressions: rows.filter((r) => r.c.regression).map((r) => r.cells[0]!) }
}
