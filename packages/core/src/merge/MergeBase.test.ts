import { describe, expect, it } from "@effect/vitest"
import { generations, isAncestor, mergeBase, mergeBases } from "./MergeBase.ts"
import { seeded } from "./Random.testing.ts"

/** A graph from "child: parent [merge-parent]" lines; commit names stand in for hashes. */
const graph = (edges: Record<string, ReadonlyArray<string>>) => (h: string): ReadonlyArray<string> | undefined => edges[h]

/** Shortest distances from `start` by a breadth-first walk over the whole history. */
const distances = (start: string, parents: (h: string) => ReadonlyArray<string> | undefined) => {
  const out = new Map([[start, 0]])
  for (const [h, d] of out) for (const p of parents(h) ?? []) if (!out.has(p)) out.set(p, d + 1)
  return out
}

/** `best` nearest first by the sum of breadth-first distances from `a` and `b`, ties by hash. */
const bfsOrder = (best: ReadonlyArray<string>, a: string, b: string, parents: (h: string) => ReadonlyArray<string> | undefined) => {
  const fromA = distances(a, parents)
  const fromB = distances(b, parents)
  const score = (h: string) => fromA.get(h)! + fromB.get(h)!
  return [...best].sort((x, y) => score(x) - score(y) || (x < y ? -1 : x > y ? 1 : 0))
}

/** The best common ancestors by definition: every common ancestor, less those below another. */
const bruteForce = (a: string, b: string, edges: ReadonlyMap<string, ReadonlyArray<string>>) => {
  const ancestorsOf = (h: string): Set<string> => {
    const out = new Set([h])
    for (const x of out) for (const p of edges.get(x) ?? []) out.add(p)
    return out
  }
  const fromB = ancestorsOf(b)
  const common = [...ancestorsOf(a)].filter((h) => fromB.has(h))
  const best = common.filter((h) => !common.some((o) => o !== h && ancestorsOf(o).has(h)))
  return bfsOrder(best, a, b, (h) => edges.get(h))
}

describe("MergeBase", () => {
  //   r - a1 - a2          (main)
  //         \
  //          b1 - b2       (branch)
  const forked = graph({ r: [], a1: ["r"], a2: ["a1"], b1: ["a1"], b2: ["b1"] })

  it("finds the fork point, and the ancestor itself on a line", () => {
    expect(mergeBase("a2", "b2", forked)).toBe("a1")
    expect(mergeBase("b2", "a2", forked)).toBe("a1")
    expect(mergeBase("a2", "a1", forked)).toBe("a1")
    expect(mergeBase("r", "b2", forked)).toBe("r")
    expect(mergeBase("b2", "b2", forked)).toBe("b2")
  })

  it("follows merge-parent edges: after main is merged into the branch, the base moves up", () => {
    // b3 merges a2 into the branch; main then moves on to a3.
    const merged = graph({ r: [], a1: ["r"], a2: ["a1"], a3: ["a2"], b1: ["a1"], b2: ["b1"], b3: ["b2", "a2"] })
    expect(mergeBase("a3", "b3", merged)).toBe("a2")
    expect(mergeBase("b3", "a3", merged)).toBe("a2")
  })

  it("skips common ancestors that are ancestors of another one", () => {
    // Both x and y descend from r; y also from x, so only y is a best base.
    const g = graph({ r: [], x: ["r"], y: ["x"], p: ["y", "r"], q: ["y"] })
    expect(mergeBases("p", "q", g)).toEqual(["y"])
  })

  it("returns every best base of a criss-cross merge, nearest first, ties by hash", () => {
    //   r - m1 - c1 (merges m2) - t1
    //     \    X
    //      m2 - c2 (merges m1) - t2 - t3
    const g = graph({ r: [], m1: ["r"], m2: ["r"], c1: ["m1", "m2"], c2: ["m2", "m1"], t1: ["c1"], t2: ["c2"], t3: ["t2"] })
    expect(mergeBases("t1", "t3", g)).toEqual(["m1", "m2"])
    expect(mergeBase("t3", "t1", g)).toBe("m1")
    // Nearer wins over the hash order.
    const h = graph({ r: [], z: ["r"], a0: ["r"], a: ["a0"], c1: ["z", "a"], c2: ["a", "z"] })
    expect(mergeBases("c1", "c2", h)).toEqual(["a", "z"])
    const k = graph({ r: [], z: ["r"], a0: ["r"], a: ["a0"], c1: ["z", "a0"], c2: ["a0", "z"] })
    expect(mergeBases("c1", "c2", k)).toEqual(["a0", "z"])
  })

  it("answers null for unrelated histories and treats unknown parents as roots", () => {
    const g = graph({ a: ["r1"], r1: [], b: ["r2"], r2: [] })
    expect(mergeBase("a", "b", g)).toBeNull()
    // A shallow history: the parent of s1 is not known.
    const shallow = graph({ s2: ["s1"], s3: ["s1"] })
    expect(mergeBase("s2", "s3", shallow)).toBe("s1")
    expect(mergeBase("x", "y", shallow)).toBeNull()
  })

  it("tells ancestors apart", () => {
    expect(isAncestor("r", "b2", forked)).toBe(true)
    expect(isAncestor("b2", "b2", forked)).toBe(true)
    expect(isAncestor("a2", "b2", forked)).toBe(false)
    expect(isAncestor("b1", "a2", forked)).toBe(false)
  })

  it("agrees with a brute-force definition on random DAGs", () => {
    const rnd = seeded(5)
    for (let round = 0; round < 200; round++) {
      const n = 2 + rnd.int(40)
      const edges: Record<string, Array<string>> = {}
      const name = (i: number) => `c${String(i).padStart(2, "0")}`
      for (let i = 0; i < n; i++) {
        const parents = i === 0 || rnd.int(8) === 0 ? [] : [name(rnd.int(i))]
        if (i > 1 && rnd.int(3) === 0) {
          const other = name(rnd.int(i))
          if (!parents.includes(other)) parents.push(other)
        }
        edges[name(i)] = parents
      }
      const g = graph(edges)
      const ancestorsOf = (h: string): Set<string> => {
        const out = new Set([h])
        for (const x of out) for (const p of edges[x] ?? []) out.add(p)
        return out
      }
      const a = name(rnd.int(n))
      const b = name(rnd.int(n))
      const common = [...ancestorsOf(a)].filter((h) => ancestorsOf(b).has(h))
      const best = common.filter((h) => !common.some((o) => o !== h && ancestorsOf(o).has(h)))
      expect(new Set(mergeBases(a, b, g))).toEqual(new Set(best))
      expect(mergeBases(a, b, g)).toEqual(bfsOrder(best, a, b, g))
      expect(mergeBase(a, b, g)).toBe(mergeBase(a, b, g))
      for (const h of common) expect(isAncestor(h, a, g) && isAncestor(h, b, g)).toBe(true)
    }
  })

  it("with remembered generations, answers as by definition while the graph grows, also where parents become known late", () => {
    const rnd = seeded(11)
    for (let round = 0; round < 40; round++) {
      const edges = new Map<string, ReadonlyArray<string>>()
      const parents = (h: string) => edges.get(h)
      const remembered = generations(parents)
      const name = (i: number) => `c${String(i).padStart(3, "0")}`
      // Commits whose parents are not known yet (a shallow edge), given their parents later.
      const late: Array<[string, ReadonlyArray<string>]> = []
      for (let i = 0; i < 60; i++) {
        const ps = i === 0 ? [] : [name(rnd.int(i))]
        if (i > 1 && rnd.int(3) === 0) {
          const other = name(rnd.int(i))
          if (!ps.includes(other)) ps.push(other)
        }
        if (i > 0 && rnd.int(10) === 0) late.push([name(i), ps])
        else edges.set(name(i), ps)
        if (late.length > 0 && rnd.int(4) === 0) edges.set(...late.shift()!)
        for (let q = 0; q < 3; q++) {
          const a = name(rnd.int(i + 1))
          const b = name(rnd.int(i + 1))
          expect(mergeBases(a, b, parents, remembered), `${a} ${b}`).toEqual(bruteForce(a, b, edges))
          const ancestor = name(rnd.int(i + 1))
          expect(isAncestor(ancestor, a, parents, remembered)).toBe(isAncestor(ancestor, a, parents))
        }
      }
    }
  })

  it("with remembered generations, reads the history from the heads down to the base, not all of it", () => {
    // main: 5,000 commits in a line; a branch of 3 commits forked 10 commits below its head.
    const edges = new Map<string, ReadonlyArray<string>>([["m0", []]])
    for (let i = 1; i < 5000; i++) edges.set(`m${i}`, [`m${i - 1}`])
    edges.set("b1", ["m4989"]).set("b2", ["b1"]).set("b3", ["b2"])
    let reads = 0
    const parents = (h: string) => {
      reads++
      return edges.get(h)
    }
    const remembered = generations(parents)
    expect(mergeBase("m4999", "b3", parents, remembered)).toBe("m4989")
    // Then main gets a merge of the branch and moves on; another branch forks from it.
    edges.set("m5000", ["m4999", "b3"]).set("m5001", ["m5000"]).set("c1", ["m5000"])
    reads = 0
    expect(mergeBase("m5001", "c1", parents, remembered)).toBe("m5000")
    expect(mergeBase("m5001", "b3", parents, remembered)).toBe("b3")
    expect(mergeBases("c1", "m4999", parents, remembered)).toEqual(["m4999"])
    expect(isAncestor("c1", "m5001", parents, remembered)).toBe(false)
    expect(reads, "commits read").toBeLessThan(60)
  })
})
