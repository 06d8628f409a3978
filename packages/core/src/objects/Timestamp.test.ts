import { describe, expect, it } from "@effect/vitest"
import { canonicalTimestamp, formatTimestamp, fromDate, parseTimestamp } from "./Timestamp.ts"

const base = BigInt(Date.UTC(2026, 5, 24)) * 1_000_000n

describe("Timestamp", () => {
  it("prints like chrono's to_rfc3339: +00:00, fraction only when non-zero, 3/6/9 digits", () => {
    expect(formatTimestamp(base)).toBe("2026-06-24T00:00:00+00:00")
    expect(formatTimestamp(base + 500_000_000n)).toBe("2026-06-24T00:00:00.500+00:00")
    expect(formatTimestamp(base + 1_000_000n)).toBe("2026-06-24T00:00:00.001+00:00")
    expect(formatTimestamp(base + 123_456_000n)).toBe("2026-06-24T00:00:00.123456+00:00")
    expect(formatTimestamp(base + 1_000n)).toBe("2026-06-24T00:00:00.000001+00:00")
    expect(formatTimestamp(base + 1n)).toBe("2026-06-24T00:00:00.000000001+00:00")
    expect(formatTimestamp(base + 123_456_789n)).toBe("2026-06-24T00:00:00.123456789+00:00")
    expect(formatTimestamp(base, "Z")).toBe("2026-06-24T00:00:00Z")
    expect(formatTimestamp(-1n)).toBe("1969-12-31T23:59:59.999999999+00:00")
    expect(formatTimestamp(fromDate(new Date("2001-02-03T04:05:06.007Z")))).toBe("2001-02-03T04:05:06.007+00:00")
  })

  it("parses RFC 3339 with any offset to nanoseconds, without losing precision", () => {
    expect(parseTimestamp("2026-06-24T00:00:00Z")).toBe(base)
    expect(parseTimestamp("2026-06-24T00:00:00+00:00")).toBe(base)
    expect(parseTimestamp("2026-06-24t00:00:00z")).toBe(base)
    expect(parseTimestamp("2026-06-24T02:30:00+02:30")).toBe(base)
    expect(parseTimestamp("2026-06-23T23:00:00-01:00")).toBe(base)
    expect(parseTimestamp("2026-06-24T00:00:00.123456789Z")).toBe(base + 123_456_789n)
    expect(parseTimestamp("2026-06-24T00:00:00.5Z")).toBe(base + 500_000_000n)
    expect(parseTimestamp("2024-02-29T00:00:00Z")).toBe(BigInt(Date.UTC(2024, 1, 29)) * 1_000_000n)
    expect(parseTimestamp("0050-01-01T00:00:00Z")).toBe(BigInt(new Date("0050-01-01T00:00:00Z").getTime()) * 1_000_000n)
    expect(canonicalTimestamp("2026-06-24T05:00:00.120+05:00")).toBe("2026-06-24T00:00:00.120+00:00")
  })

  it("round-trips its own output", () => {
    for (const ns of [base, base + 1n, base + 999_999_999n, 0n, -1_500_000_000n]) expect(parseTimestamp(formatTimestamp(ns))).toBe(ns)
  })

  it("rejects malformed and impossible times", () => {
    for (
      const bad of [
        "",
        "2026-06-24",
        "2026-06-24T00:00:00", // no offset
        "2026-06-24 00:00:00Z",
        "2026-06-24T00:00Z",
        "2026-06-24T00:00:00.Z",
        "2026-06-24T00:00:00.1234567890Z", // 10 digits
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-02-29T00:00:00Z", // not a leap year
        "2026-04-31T00:00:00Z",
        "2026-06-24T24:00:00Z",
        "2026-06-24T00:60:00Z",
        "2026-06-24T00:00:60Z", // leap second
        "2026-06-24T00:00:00+24:00",
        "2026-06-24T00:00:00+0000",
        "0000-01-01T00:00:00+00:01", // before year 0 in UTC
        "+12026-06-24T00:00:00Z",
        " 2026-06-24T00:00:00Z",
        "2026-06-24T00:00:00Z\n"
      ]
    ) {
      expect(parseTimestamp(bad), JSON.stringify(bad)).toBeUndefined()
    }
  })
})
