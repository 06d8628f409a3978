/**
 * The benchmark table's regression rule (scripts/bench/table/baseline.ts): a row is marked when its
 * ratio is more than 20% worse than the stored one, in the row's own direction, and only then.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type BaselineFile, compare, readBaseline, renderTable, writeBaseline } from "../../scripts/bench/table/baseline.ts"
import type { Measure } from "../../scripts/bench/table/measure.ts"

const row = (id: string, value: number, baseline: number, better: "higher" | "lower"): Measure =>
  ({ id, name: id, value, unit: "x", baselineName: "b", baseline, better, goal: "-", met: undefined })

const stored = (rows: Record<string, { ratio: number; better: "higher" | "lower" }>): BaselineFile => ({
  about: "test",
  commit: "abc",
  date: "2026-11-26",
  machine: "test",
  rows: Object.fromEntries(Object.entries(rows).map(([id, r]) => [id, { ...r, value: 0, unit: "x" }]))
})

describe("bench baseline", () => {
  it("marks a higher-is-better row only when its ratio fell by more than 20%", () => {
    const last = stored({ rps: { ratio: 0.5, better: "higher" } })
    assert.isFalse(compare(row("rps", 41, 100, "higher"), last).regression) // 0.41: 18% lower
    assert.isTrue(compare(row("rps", 39, 100, "higher"), last).regression) // 0.39: 22% lower
    assert.isFalse(compare(row("rps", 90, 100, "higher"), last).regression)
    assert.match(compare(row("rps", 90, 100, "higher"), last).text, /^\+80% better/)
  })

  it("marks a lower-is-better row only when its ratio rose by more than 20%", () => {
    const last = stored({ push: { ratio: 1.0, better: "lower" } })
    assert.isFalse(compare(row("push", 119, 100, "lower"), last).regression)
    assert.isTrue(compare(row("push", 121, 100, "lower"), last).regression)
    assert.isFalse(compare(row("push", 50, 100, "lower"), last).regression)
    assert.match(compare(row("push", 200, 100, "lower"), last).text, /^-50% worse .*REGRESSION/)
  })

  it("a row without a stored ratio is new, never a regression", () => {
    assert.deepStrictEqual(compare(row("fresh", 1, 100, "higher"), stored({})), { text: "new", regression: false })
    assert.deepStrictEqual(compare(row("fresh", 1, 100, "higher"), undefined), { text: "new", regression: false })
  })

  it("round-trips the ratios through the file, and the table names the regressed rows", () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-baseline-")), "baseline.json")
    try {
      writeBaseline([row("rps", 50, 100, "higher"), row("push", 100, 100, "lower")], { about: "t", commit: "c", date: "d", machine: "m" }, file)
      const back = readBaseline(file)!
      assert.strictEqual(back.rows["rps"]!.ratio, 0.5)
      assert.strictEqual(back.rows["push"]!.better, "lower")
      const table = renderTable([row("rps", 30, 100, "higher"), row("push", 100, 100, "lower")], back)
      assert.deepStrictEqual(table.regressions, ["rps"])
      assert.include(table.text, "REGRESSION")
    } finally {
      fs.rmSync(path.dirname(file), { recursive: true, force: true })
    }
  })
})
