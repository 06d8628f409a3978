import { describe, expect, it } from "@effect/vitest"
import { Duration } from "effect"
import { GROWTH_BYTES, IDLE_UTILIZATION, MIN_INTERVAL, shouldCollect } from "./IdleGc.ts"

const MiB = 1024 * 1024
/** No collection by this watch yet. */
const never = Infinity

describe("IdleGc.shouldCollect", () => {
  it("collects what V8 holds past the live bytes, whatever the RSS (a collection during a push left it high)", () => {
    // V8's used heap and buffers after the last collection: 60 MiB; now 60 + 40 MiB of a clone's garbage.
    expect(shouldCollect({ utilization: 0.02, held: 100 * MiB, floor: 60 * MiB, sinceLast: never })).toBe(true)
  })

  it("collects once idle and grown past the floor by more than the allowance", () => {
    expect(shouldCollect({ utilization: 0.01, held: 200 * MiB + GROWTH_BYTES + 1, floor: 200 * MiB, sinceLast: never })).toBe(true)
  })

  it("leaves a busy process alone, however much it grew (a transfer still running)", () => {
    expect(shouldCollect({ utilization: IDLE_UTILIZATION, held: 900 * MiB, floor: 200 * MiB, sinceLast: never })).toBe(false)
    expect(shouldCollect({ utilization: 0.6, held: 900 * MiB, floor: 200 * MiB, sinceLast: never })).toBe(false)
  })

  it("leaves an idle process alone that grew within the allowance (no collection every period)", () => {
    expect(shouldCollect({ utilization: 0, held: 200 * MiB + GROWTH_BYTES, floor: 200 * MiB, sinceLast: never })).toBe(false)
    expect(shouldCollect({ utilization: 0, held: 150 * MiB, floor: 200 * MiB, sinceLast: never })).toBe(false)
  })

  it("collects at most once per MIN_INTERVAL under steady moderate load (16 MiB of garbage every period)", () => {
    const min = Duration.toMillis(MIN_INTERVAL)
    const grown = { utilization: 0.3, held: 200 * MiB + 2 * GROWTH_BYTES, floor: 200 * MiB }
    expect(shouldCollect({ ...grown, sinceLast: 10_000 })).toBe(false)
    expect(shouldCollect({ ...grown, sinceLast: min - 1 })).toBe(false)
    expect(shouldCollect({ ...grown, sinceLast: min })).toBe(true)
  })
})
