import { describe, expect, it } from "@effect/vitest"
import { parseAuditQuery } from "./AuditPages.ts"

const query = (fields: Partial<Record<"actor" | "action" | "since" | "cursor", string>>) =>
  parseAuditQuery({ actor: "", action: "", since: "", cursor: "", ...fields })

describe("the audit page's query", () => {
  it("reads a browser's datetime-local value as UTC, and keeps an offset it is given", () => {
    expect(query({ since: "2026-11-24T16:00" })).toEqual({ filter: { actor: undefined, action: undefined, since: "2026-11-24T16:00:00.000000Z" } })
    expect(query({ since: "2026-11-24T16:00:00+01:00" })).toMatchObject({ filter: { since: "2026-11-24T15:00:00.000000Z" } })
  })

  it("passes the filters and the cursor on as the API's read takes them", () => {
    expect(query({ actor: "mel", action: "repo.create", cursor: "42" })).toEqual({
      filter: { actor: "mel", action: "repo.create", since: undefined },
      after: ["42"]
    })
  })

  it("names what is wrong instead of reading: a malformed time, a cursor this log never gave, an over-long or controlling filter", () => {
    for (const bad of [{ since: "yesterday" }, { since: "2026-13-01T00:00" }, { cursor: "0" }, { cursor: "abc" }, { actor: "x".repeat(201) }, { action: "a\u0007b" }]) {
      expect(query(bad), JSON.stringify(bad)).toHaveProperty("problem")
    }
  })
})
