/**
 * Operations answer a stored success as its command's success schema encodes it now, whatever version stored it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { storedSuccessResponse } from "./Entities.ts"

const merged = {
  message: "m",
  commit_hash: "c".repeat(64),
  manifest_hash: "d".repeat(64),
  parent_hash: "e".repeat(64),
  merge_parent_hash: "f".repeat(64)
}

describe("storedSuccessResponse", () => {
  it.effect("a merge success stored before the notes loses its repository row", () =>
    Effect.gen(function*() {
      const stored = { ...merged, repository: { version: 3, updated_at: "2026-11-27T10:00:00.000Z" } }
      expect(yield* storedSuccessResponse("Repository", "Merge", stored)).toEqual(merged)
      expect(yield* storedSuccessResponse("Repository", "Merge", merged)).toEqual(merged)
    }))

  it.effect("a success that does not decode, or of an unknown command, is answered as stored", () =>
    Effect.gen(function*() {
      expect(yield* storedSuccessResponse("Repository", "Merge", { message: 1 })).toEqual({ message: 1 })
      expect(yield* storedSuccessResponse("Nobody", "Merge", { a: 1 })).toEqual({ a: 1 })
    }))
})
