/**
 * The trees planning keeps across merges: a kept tree is answered without a read, per organization (another
 * organization's copy of a hash is read from its own rows), and the kept entries stay within their bound,
 * the least recently used going first.
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Tree from "@grove/core/objects/Tree"
import { Effect } from "effect"
import type { ContentObjects } from "../content/ContentObjects.ts"
import { KEPT_ENTRIES, makePlanningTrees } from "./PlanningTrees.ts"

const h = (c: string) => c.repeat(64)
const blob = (name: string, hash: string): Tree.TreeEntry => ({ kind: "blob", name, hash, mode: "regular" })

/** A store of `stored` trees (per organization) that records each read's hashes. */
const store = (stored: Record<string, Record<string, ReadonlyArray<Tree.TreeEntry>>>) => {
  const reads: Array<ReadonlyArray<string>> = []
  const objects = {
    loadTrees: (orgId: string, hashes: ReadonlyArray<string>) =>
      Effect.sync(() => {
        reads.push([...hashes])
        const found = new Map<string, ReadonlyArray<Tree.TreeEntry>>()
        for (const hash of hashes) {
          const entries = stored[orgId]?.[hash]
          if (entries !== undefined) found.set(hash, entries)
        }
        return found
      })
  } as unknown as ContentObjects["Service"]
  return { objects, reads }
}

describe("PlanningTrees", () => {
  it.effect("a tree read once, or remembered, is answered without a read, and only to its organization", () =>
    Effect.gen(function*() {
      const entries = [blob("a.txt", h("1"))]
      const { objects, reads } = store({ org1: { [h("a")]: entries }, org2: { [h("a")]: entries } })
      const planning = makePlanningTrees(objects)
      expect(yield* planning.view("org1").resolve((lookup) => lookup(h("a")))).toEqual(entries)
      expect(reads).toEqual([[h("a")]])
      // A later planning of the same organization: kept.
      expect(yield* planning.view("org1").resolve((lookup) => lookup(h("a")))).toEqual(entries)
      expect(reads).toHaveLength(1)
      // Another organization reads its own rows.
      expect(yield* planning.view("org2").resolve((lookup) => lookup(h("a")))).toEqual(entries)
      expect(reads).toEqual([[h("a")], [h("a")]])
      // A tree remembered (built by a merge, or read with the branch) costs no read either.
      planning.remember("org1", h("b"), [blob("b.txt", h("2"))])
      expect(yield* planning.view("org1").resolve((lookup) => lookup(h("b")))).toEqual([blob("b.txt", h("2"))])
      expect(reads).toHaveLength(2)
      // A tree that does not exist is not kept: asked again, it is read again.
      yield* planning.view("org1").resolve((lookup) => lookup(h("c")))
      yield* planning.view("org1").resolve((lookup) => lookup(h("c")))
      expect(reads.slice(2)).toEqual([[h("c")], [h("c")]])
    }))

  it.effect("at most KEPT_ENTRIES entries are kept, the least recently used going first", () =>
    Effect.gen(function*() {
      const size = KEPT_ENTRIES / 4 - 1
      const tree = (c: string) => Array.from({ length: size }, (_, i) => blob(`${c}${i}`, h("1")))
      const { objects, reads } = store({ org: Object.fromEntries(["a", "b", "c", "d", "e"].map((c) => [h(c), tree(c)])) })
      const planning = makePlanningTrees(objects)
      for (const c of ["a", "b", "c", "d"]) planning.remember("org", h(c), tree(c))
      // "a" used: "b" is now the least recently used, and goes when "e" comes.
      yield* planning.view("org").resolve((lookup) => lookup(h("a")))
      planning.remember("org", h("e"), tree("e"))
      expect(reads).toEqual([])
      yield* planning.view("org").resolve((lookup) => [lookup(h("a")), lookup(h("c")), lookup(h("d")), lookup(h("e"))])
      expect(reads).toEqual([])
      yield* planning.view("org").resolve((lookup) => lookup(h("b")))
      expect(reads).toEqual([[h("b")]])
      // Larger than the bound alone: never kept.
      planning.remember("org", h("f"), Array.from({ length: KEPT_ENTRIES }, (_, i) => blob(`f${i}`, h("1"))))
      yield* planning.view("org").resolve((lookup) => lookup(h("f")))
      expect(reads).toEqual([[h("b")], [h("f")]])
    }))

  it.effect("each server keeps its own: what one planning service keeps, another does not answer", () =>
    Effect.gen(function*() {
      const entries = [blob("a.txt", h("1"))]
      const { objects, reads } = store({ org: { [h("a")]: entries } })
      const one = makePlanningTrees(objects)
      const other = makePlanningTrees(objects)
      one.remember("org", h("b"), [blob("b.txt", h("2"))])
      yield* one.view("org").resolve((lookup) => lookup(h("a")))
      expect(reads).toEqual([[h("a")]])
      expect(yield* other.view("org").resolve((lookup) => [lookup(h("a")), lookup(h("b"))])).toEqual([entries, undefined])
      expect(reads).toEqual([[h("a")], [h("a"), h("b")]])
    }))

  it("keeps the manifests of the commits planning read, per repository", () => {
    const planning = makePlanningTrees(store({}).objects)
    planning.rememberManifest("repo1", h("c"), h("m"))
    expect(planning.manifest("repo1", h("c"))).toBe(h("m"))
    expect(planning.manifest("repo2", h("c"))).toBeUndefined()
    expect(makePlanningTrees(store({}).objects).manifest("repo1", h("c"))).toBeUndefined()
  })
})
