import { describe, expect, it } from "@effect/vitest"
import { hello } from "@grove/core"

describe("core", () => {
  it("runs on node 24", () => {
    expect(process.version.startsWith("v24.")).toBe(true)
    expect(hello("x")).toBe("hello x")
  })
})
