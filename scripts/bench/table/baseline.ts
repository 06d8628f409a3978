/**
 * The last table's ratios (scripts/bench/baseline.json), the comparison of a new table with them
 * and the table's text. A row is a regression when its ratio (value / same-run baseline) is more
 * than 20% worse than the stored one, in the row's own direction (higher or lower is better).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fmt, type Measure, ratioOf } from "./measure.ts"

export const BASELINE_FILE = path.resolve(import.meta.dirname, "../baseline.json")
/** Worse than the stored ratio by more than this fraction is a regression. */
export const TOLERANCE = 0.2

export interface StoredRow {
  readonly ratio: number
  readonly better: "higher" | "lower"
  readonly value: number
  readonly unit: string
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
  for (const m of measures) if (Number.isFinite(ratioOf(m))) rows[m.id] = { ratio: Number(ratioOf(m).toPrecision(4)), better: m.better, value: Number(m.value.toPrecision(4)), unit: m.unit }
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
  const regression = m.better === "higher" ? now < before.ratio * (1 - TOLERANCE) : now > before.ratio * (1 + TOLERANCE)
  const pct = `${change >= 0 ? "+" : ""}${(change * 100).toFixed(0)}%`
  return { text: `${pct} ${change >= 0 ? "better" : "worse"} (was ${fmt(before.ratio, 3)}x)${regression ? "  REGRESSION" : ""}`, regression }
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
        `${fmt(ratioOf(m), 3)}x (${m.better} is better)`,
        m.goal,
        m.met === undefined ? "-" : m.met ? "met" : "NOT MET",
        c.text
      ],
      detail: m.detail
    }
  })
  const header = ["measure", "baseline (same run)", "value", "ratio", "goal", "met", "vs last table"]
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r.cells[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
  const out = [line(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map((r) => line(r.cells))]
  const details = rows.filter((r) => r.detail !== undefined).map((r) => `  ${r.cells[0]}: ${r.detail}`)
  return { text: [...out, "", "details:", ...details].join("\n"), regressions: rows.filter((r) => r.c.regression).map((r) => r.cells[0]!) }
}
