import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { delayAfter, SignInThrottle } from "./SignInThrottle.ts"

describe("SignInThrottle", () => {
  it("doubles the delay after the free failures, up to 15 minutes", () => {
    expect([0, 1, 2, 3, 4, 5, 13, 40].map((n) => delayAfter(n, 3))).toEqual([0, 0, 0, 1000, 2000, 4000, 900_000, 900_000])
  })

  it.effect("counts per name and address: guesses from one address never lock the owner out of another", () =>
    Effect.gen(function*() {
      let now = 1_000_000
      const throttle = SignInThrottle.make(() => now)
      for (let i = 0; i < 10; i++) yield* throttle.failed("dave", "10.0.0.66")
      expect(yield* throttle.check("dave", "10.0.0.66")).toEqual({ allowed: false, retryAfterSeconds: 128 })
      expect(yield* throttle.check("Dave", "10.0.0.66")).toMatchObject({ allowed: false })
      expect(yield* throttle.check("dave", "10.0.0.7")).toEqual({ allowed: true })
      expect(yield* throttle.check("carol", "10.0.0.66")).toEqual({ allowed: true })
      now += 128_000
      expect(yield* throttle.check("dave", "10.0.0.66")).toEqual({ allowed: true })
      yield* throttle.failed("dave", "10.0.0.66")
      expect(yield* throttle.check("dave", "10.0.0.66")).toEqual({ allowed: false, retryAfterSeconds: 256 })
    }))

  it.effect("slows one address spraying many names, and forgets after a day", () =>
    Effect.gen(function*() {
      let now = 1_000_000
      const throttle = SignInThrottle.make(() => now)
      for (let i = 0; i < 20; i++) yield* throttle.failed(`user${i}`, "10.0.0.66")
      expect(yield* throttle.check("someone", "10.0.0.66")).toEqual({ allowed: false, retryAfterSeconds: 1 })
      expect(yield* throttle.check("someone", "10.0.0.7")).toEqual({ allowed: true })
      now += 24 * 3600 * 1000 + 1
      expect(yield* throttle.check("someone", "10.0.0.66")).toEqual({ allowed: true })
    }))

  it.effect("a success clears its own pair only", () =>
    Effect.gen(function*() {
      const throttle = SignInThrottle.make(() => 5)
      for (let i = 0; i < 4; i++) yield* throttle.failed("dave", "10.0.0.7")
      yield* throttle.succeeded("dave", "10.0.0.7")
      expect(yield* throttle.check("dave", "10.0.0.7")).toEqual({ allowed: true })
    }))
})
