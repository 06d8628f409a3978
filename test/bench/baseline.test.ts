/**
 * The benchmark table's regression rule (scripts/bench/table/baseline.ts): a row is marked when its
 * ratio is more than 20% worse than the stored one, in the row's own direction, and beyond the spread
 * its samples measured (scripts/bench/table/measure.ts, ratioInterval), and only then.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type BaselineFile, compare, readBaseline, renderTable, writeBaseline } from "../../scripts/bench/table/baseline.ts"
import { type Measure, medianInterval, ratioInterval } from "../../scripts/bench/table/measure.ts"

const row = (id: string, value: number, baseline: number, better: "higher" | "lower"): Measure =>
  ({ id, name: id, value, unit: "x", baselineName: "b", baseline, better, goal: "-", met: undefined })

const stored = (rows: Record<string, { ratio: number; better: "higher" | "lower"; low?: number; high?: number }>): BaselineFile => ({
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

  it("the median's interval comes from order statistics: the whole range under 6 samples, inner ranks above", () => {
    assert.deepStrictEqual(medianInterval([5, 1, 3]), [1, 5])
    const fifteen = Array.from({ length: 15 }, (_, i) => 15 - i) // 15..1
    assert.deepStrictEqual(medianInterval(fifteen), [4, 12]) // ranks 3 and 11 (0-based) of 1..15
    // Paired ratios, and per-side samples (the quotient of the two intervals; inverse for a rate of latencies).
    assert.deepStrictEqual(ratioInterval({ value: 1, baseline: 1, samples: { ratios: [0.9, 1.1, 1.0] } }), [0.9, 1.1])
    assert.deepStrictEqual(ratioInterval({ value: 4, baseline: 2, samples: { value: [3, 4, 5], baseline: [1, 2, 2.5] } }), [1.2, 5])
    assert.deepStrictEqual(ratioInterval({ value: 1, baseline: 2, samples: { value: [1, 2, 4], baseline: [1, 2, 2], inverse: true } }), [0.25, 2])
    assert.isUndefined(ratioInterval({ value: 1, baseline: 2 }))
  })

  it("a change past 20% within the measured spread is not a regression; beyond it, it is", () => {
    const last = stored({ push: { ratio: 1.0, better: "lower", low: 0.9, high: 1.3 } })
    // 1.4x (29% worse), but its samples reach down to 1.2, inside the stored 0.9-1.3.
    const noisy = { ...row("push", 140, 100, "lower"), samples: { ratios: [1.2, 1.4, 1.6] } }
    assert.isFalse(compare(noisy, last).regression)
    assert.match(compare(noisy, last).text, /within spread/)
    // The same median with a tight spread above the stored interval.
    const clear = { ...row("push", 140, 100, "lower"), samples: { ratios: [1.35, 1.4, 1.45] } }
    assert.isTrue(compare(clear, last).regression)
    // A higher-is-better row: its best sample must still be under the stored interval's low end.
    const rps = stored({ rps: { ratio: 0.5, better: "higher", low: 0.45, high: 0.55 } })
    assert.isFalse(compare({ ...row("rps", 35, 100, "higher"), samples: { ratios: [0.3, 0.35, 0.46] } }, rps).regression)
    assert.isTrue(compare({ ...row("rps", 35, 100, "higher"), samples: { ratios: [0.3, 0.35, 0.4] } }, rps).regression)
  })

  it("stores each row's interval and sample count", () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "grove-bench-baseline-")), "baseline.json")
    try {
      writeBaseline([{ ...row("push", 100, 100, "lower"), samples: { ratios: [0.9, 1.0, 1.2] } }], { about: "t", commit: "c", date: "d", machine: "m" }, file)
      const back = readBaseline(file)!.rows["push"]!
      assert.deepStrictEqual([back.ratio, back.low, back.high, back.samples], [1, 0.9, 1.2, 3])
    } finally {
      fs.rmSync(path.dirname(file), { recursive: true, force: true })
    }
  })
})
