import { describe, expect, it } from "@effect/vitest"
import * as RunClaims from "./RunClaims.ts"

describe("RunClaims", () => {
  it("sends one Start of a run at a time: a run whose Start is followed is not claimed again", () => {
    const claims = RunClaims.make()
    expect(claims.follow(7)).toBe(true)
    // The Start is pending, the run still queued: the next look skips it, and a second Start is refused.
    expect(claims.claimable(7)).toBe(false)
    expect(claims.claimable(8)).toBe(true)
    expect(claims.follow(7)).toBe(false)
    // Its follow gave up (the Start can no longer apply): it may be claimed again.
    claims.settled(7)
    expect(claims.claimable(7)).toBe(true)
    expect(claims.follow(7)).toBe(true)
  })

  it("executes a run once until its row left running on this node, not only while it executes", () => {
    const claims = RunClaims.make()
    expect(claims.follow(3)).toBe(true)
    claims.settled(3)
    expect(claims.execute(3)).toBe(true)
    expect(claims.execute(3)).toBe(false)
    // The runner ended but its Finish is pending: still refused, and not claimable.
    expect(claims.execute(3)).toBe(false)
    expect(claims.claimable(3)).toBe(false)
    claims.left(3)
    expect(claims.claimable(3)).toBe(true)
    expect(claims.execute(3)).toBe(true)
  })
})
