/** RememberedTrees: answers what it was given, per organization; past its bound the least recently used trees go first. */
import { describe, expect, it } from "vitest"
import type * as Tree from "@grove/core/objects/Tree"
import { makeRememberedTrees } from "./RememberedTrees.ts"

const entries = (n: number): ReadonlyArray<Tree.TreeEntry> =>
  Array.from({ length: n }, (_, i) => ({ name: `f${i}`, kind: "blob" as const, hash: "0".repeat(64), mode: "regular" as const }))

describe("RememberedTrees", () => {
  it("keeps trees by organization and hash, and lets the least recently used go past its bound", () => {
    const trees = makeRememberedTrees(10)
    const [a, b, c] = [entries(3), entries(3), entries(3)]
    trees.add("org1", "a", a)
    trees.add("org1", "b", b)
    expect(trees.get("org1", "a")).toBe(a)
    expect(trees.get("org2", "a")).toBeUndefined()
    // 4 + 4 + 4 entries' weight is past 10: b (used least recently, a was just read) goes.
    trees.add("org1", "c", c)
    expect(trees.get("org1", "b")).toBeUndefined()
    expect(trees.get("org1", "a")).toBe(a)
    expect(trees.get("org1", "c")).toBe(c)
    // A tree heavier than the whole bound is not kept (and pushes nothing out).
    trees.add("org1", "big", entries(10))
    expect(trees.get("org1", "big")).toBeUndefined()
    expect(trees.get("org1", "a")).toBe(a)
  })
})
