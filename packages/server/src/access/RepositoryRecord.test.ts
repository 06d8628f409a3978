import { describe, expect, it } from "@effect/vitest"
import { type RepositoryRecord, toApiRepository } from "./RepositoryRecord.ts"

const record: RepositoryRecord = {
  id: "r1",
  orgId: "o1",
  owner: "acme",
  name: "Widgets",
  description: null,
  isPublic: false,
  head: null,
  createdAt: new Date("2026-01-02T03:04:05.000Z"),
  updatedAt: new Date("2026-01-02T03:04:06.000Z"),
  version: 1
}

describe("toApiRepository", () => {
  it("answers the API form of a record", () => {
    expect(toApiRepository(record)).toEqual({
      id: "r1",
      owner: "acme",
      name: "Widgets",
      full_name: "acme/Widgets",
      is_public: false,
      visibility: "private",
      head: null,
      default_branch: "main",
      created_at: "2026-01-02T03:04:05.000Z",
      updated_at: "2026-01-02T03:04:06.000Z"
    })
  })

  it("builds a record's form once, and a changed record (a new object, same id) gets its own", () => {
    const first = toApiRepository(record)
    expect(toApiRepository(record)).toBe(first)
    const changed: RepositoryRecord = { ...record, description: "now described", isPublic: true, head: "abc", version: 2 }
    expect(toApiRepository(changed)).toMatchObject({ description: "now described", is_public: true, visibility: "public", head: "abc" })
    expect(toApiRepository(record)).toBe(first)
    expect(first).not.toHaveProperty("description")
  })
})
