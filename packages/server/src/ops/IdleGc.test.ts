import { describe, expect, it } from "@effect/vitest"
import { GROWTH_BYTES, IDLE_UTILIZATION, shouldCollect } from "./IdleGc.ts"

const MiB = 1024 * 1024

describe("IdleGc.shouldCollect", () => {
  it("collects once idle and grown past the floor by more than the allowance", () => {
    expect(shouldCollect({ utilization: 0.01, rss: 200 * MiB + GROWTH_BYTES + 1, floor: 200 * MiB })).toBe(true)
  })

  it("leaves a busy process alone, however much it grew (a transfer still running)", () => {
    expect(shouldCollect({ utilization: IDLE_UTILIZATION, rss: 900 * MiB, floor: 200 * MiB })).toBe(false)
    expect(shouldCollect({ utilization: 0.6, rss: 900 * MiB, floor: 200 * MiB })).toBe(false)
  })

  it("leaves an idle process alone that grew within the allowance (no collection every period)", () => {
    expect(shouldCollect({ utilization: 0, rss: 200 * MiB + GROWTH_BYTES, floor: 200 * MiB })).toBe(false)
    expect(shouldCollect({ utilization: 0, rss: 150 * MiB, floor: 200 * MiB })).toBe(false)
  })
})
