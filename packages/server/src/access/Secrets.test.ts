import { describe, expect, it } from "@effect/vitest"
import * as Secrets from "./Secrets.ts"

describe("Secrets", () => {
  it("makes distinct grove_ tokens and hashes them", () => {
    const a = Secrets.newToken()
    const b = Secrets.newToken()
    expect(a).toMatch(/^grove_[0-9A-Za-z]{43}$/)
    expect(a).not.toBe(b)
    expect(Secrets.looksLikeToken(a)).toBe(true)
    expect(Secrets.hashToken(a)).toMatch(/^[0-9a-f]{64}$/)
    expect(Secrets.hashToken(a)).not.toBe(Secrets.hashToken(b))
    expect(Secrets.tokenPrefix(a)).toBe(a.slice(0, 12))
  })

  it("verifies passwords with scrypt and rejects wrong ones", async () => {
    const stored = await Secrets.hashPassword("correct horse")
    expect(stored.startsWith("scrypt$")).toBe(true)
    expect(stored).not.toContain("correct horse")
    expect(await Secrets.verifyPassword("correct horse", stored)).toBe(true)
    expect(await Secrets.verifyPassword("wrong", stored)).toBe(false)
    expect(await Secrets.verifyPassword("x", "garbage")).toBe(false)
  })

  it("compares hex digests exactly: every position, every length", () => {
    const a = Secrets.hashToken(Secrets.newToken())
    expect(Secrets.constantTimeEqualHex(a, a.slice())).toBe(true)
    for (const i of [0, 31, 63]) {
      const flipped = a.slice(0, i) + (a[i] === "0" ? "1" : "0") + a.slice(i + 1)
      expect(Secrets.constantTimeEqualHex(a, flipped)).toBe(false)
    }
    expect(Secrets.constantTimeEqualHex(a, a.slice(0, 62))).toBe(false)
    expect(Secrets.constantTimeEqualHex(a, `${a}00`)).toBe(false)
    expect(Secrets.constantTimeEqualHex("", a)).toBe(false)
  })

  it("normalizes one-time codes as typed by people", () => {
    const code = Secrets.newOneTimeCode()
    expect(code).toMatch(/^[0-9A-Z]{5}-[0-9A-Z]{5}$/)
    expect(Secrets.normalizeOneTimeCode(` ${code.toLowerCase()} `)).toBe(code.replace("-", ""))
  })
})
