import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { isTimestamp, Timestamp } from "./Fields.ts"

describe("Timestamp", () => {
  it.each([
    "2030-01-31T12:00:00Z",
    "2030-01-31T12:00:00.5Z",
    "2030-01-31T12:00:00.123456789Z",
    "2030-01-31T12:00:00+02:00",
    "2030-01-31T12:00:00-11:30",
    "2028-02-29T00:00:00Z",
    "2000-02-29T23:59:59Z"
  ])("accepts %s", (value) => {
    expect(isTimestamp(value)).toBe(true)
    expect(Schema.decodeUnknownSync(Timestamp("expires_at"))(value)).toBe(value)
  })

  it.each([
    "",
    "tomorrow",
    "2030-01-31",
    "2030-01-31T12:00:00",
    "2030-01-31 12:00:00Z",
    "2030-02-30T00:00:00Z",
    "2100-02-29T00:00:00Z",
    "2030-13-01T00:00:00Z",
    "2030-00-10T00:00:00Z",
    "2030-01-00T00:00:00Z",
    "2030-01-31T24:00:00Z",
    "2030-01-31T12:60:00Z",
    "2030-01-31T12:00:60Z",
    "2030-01-31T12:00:00+24:00",
    "2030-01-31T12:00:00.Z",
    "2030-01-31T12:00:00.1234567890Z"
  ])("refuses %j", (value) => {
    expect(isTimestamp(value)).toBe(false)
    expect(() => Schema.decodeUnknownSync(Timestamp("expires_at"))(value)).toThrow(/expires_at must be an ISO 8601 timestamp/)
  })
})
