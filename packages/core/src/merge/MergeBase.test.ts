import { describe, expect, it } from "@effect/vitest"
import { growth } from "../Growth.testing.ts"
import { type Generations, generationsOf, isAncestor, mergeBase, mergeBases, type Parents } from "./MergeBase.ts"
import { seeded } from "./Random.testing.ts"

/** A graph from "child: parent [merge-parent]" lines; commit names stand in for hashes. */
const graph = (edges: Record<string, ReadonlyArray<string>>) => (h: string): ReadonlyArray<string> | undefined => edges[h]

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
      expect(mergeBase(a, b, g)).toBe(mergeBase(a, b, g))
      for (const h of common) expect(isAncestor(h, a, g) && isAncestor(h, b, g)).toBe(true)
    }
  })

  // Squash merges: each merge commit's second parent is the merged branch's tip, reachable from main by two ways of
  // different lengths. A walk that ranks commits by depth must not take a commit before its parents are ranked.
  it("finds the right base where commits are reached by paths of different lengths (squash merges)", () => {
    const small = graph({ c0: [], c1: ["c0"], c2: ["c0", "c1"], c3: ["c1"], c4: ["c3", "c1"] })
    expect(mergeBase("c2", "c4", small)).toBe("c1")
    expect(mergeBase("c4", "c2", small)).toBe("c1")
    const squashes = graph({
      c0: [], c1: ["c0"], c2: ["c0", "c1"], c3: ["c2"], c4: ["c2", "c3"], c5: ["c4"], c6: ["c4"], c7: ["c4", "c5"]
    })
    expect(mergeBases("c7", "c6", squashes)).toEqual(["c4"])
    expect(isAncestor("c1", "c7", squashes)).toBe(true)
    expect(isAncestor("c6", "c7", squashes)).toBe(false)
  })

  it("answers as walking both whole histories does, order included, with generations kept across calls or not", () => {
    const rnd = seeded(11)
    for (let round = 0; round < 300; round++) {
      const n = 2 + rnd.int(60)
      const edges = new Map<string, Array<string>>()
      const name = (i: number) => `c${String(i).padStart(2, "0")}`
      // Hashes in no order of their history (a name's number says nothing of its depth).
      const order = Array.from({ length: n }, (_, i) => i).sort(() => rnd.next() - 0.5)
      for (let i = 0; i < n; i++) {
        const parents = i === 0 || rnd.int(10) === 0 ? [] : [name(order[rnd.int(i)]!)]
        for (let k = rnd.int(3); i > 1 && k > 0; k--) {
          const other = name(order[rnd.int(i)]!)
          if (!parents.includes(other)) parents.push(other)
        }
        edges.set(name(order[i]!), parents)
      }
      // Some rounds are shallow: commits whose parents are not known (yet).
      const hidden = new Set(rnd.int(3) === 0 ? [name(order[rnd.int(n)]!), name(order[rnd.int(n)]!)] : [])
      const shallow: Parents = (h) => hidden.has(h) ? undefined : edges.get(h)
      const full: Parents = (h) => edges.get(h)
      const kept: Generations = new Map()
      for (let q = 0; q < 8; q++) {
        const a = name(rnd.int(n))
        const b = name(rnd.int(n))
        const g = q < 4 ? shallow : full
        // The kept numbers were taken while some parents were unknown: learning them must not mislead.
        expect(mergeBases(a, b, g, kept)).toEqual(walkingAll(a, b, g))
        expect(mergeBases(a, b, g)).toEqual(walkingAll(a, b, g))
        expect(isAncestor(a, b, g, kept)).toBe(isAncestor(a, b, g))
      }
    }
  })

  it("ends on a corrupt graph with a cycle", () => {
    const g = graph({ r: [], x: ["r", "y"], y: ["x"], a: ["y"], b: ["x"], s: ["s"] })
    expect(mergeBases("a", "b", g, new Map())).not.toHaveLength(0)
    expect(mergeBase("s", "a", g, new Map())).toBeNull()
    expect(isAncestor("r", "a", g, new Map())).toBe(true)
  })

  it("stops once the base is known: a branch off main's head costs the same on a main of 100 and of 5,000 commits", () => {
    /** main: m0..m<n-1>, squash merges whose second parent is a branch tip off the main before it; `topic` off the head. */
    const history = (n: number) => {
      const edges = new Map<string, ReadonlyArray<string>>([["m0", []]])
      for (let i = 1; i < n; i++) {
        edges.set(`t${i}`, [`m${i - 1}`])
        edges.set(`m${i}`, [`m${i - 1}`, `t${i}`])
      }
      edges.set("topic", [`m${n - 1}`])
      return edges
    }
    const small = history(100)
    const large = history(5_000)
    /** main's head (the squash merges' walk to a base reaches back along every second parent too). */
    const baseIn = (edges: ReadonlyMap<string, ReadonlyArray<string>>) => () => {
      const head = `m${edges.size / 2 - 1}`
      let out: string | null = null
      for (let i = 0; i < 200; i++) out = mergeBase(head, "topic", (h) => edges.get(h), generationsOf(edges))
      return out
    }
    // Numbered once, as a server keeps them beside its edges.
    baseIn(small)()
    baseIn(large)()
    const { small: smallMs, large: largeMs, result } = growth(baseIn(small), baseIn(large), 7)
    expect(result).toBe("m4999")
    // Linear in the history would be 50x; the walk itself is the same few commits.
    expect(largeMs).toBeLessThan(Math.max(5 * smallMs, 2))
  })
})

/** The definition the walk must keep: both whole histories (BFS distances), the common ancestors no other one reaches. */
const walkingAll = (a: string, b: string, parents: Parents): Array<string> => {
  if (a === b) return [a]
  const ancestors = (start: string) => {
    const distance = new Map([[start, 0]])
    for (const h of distance.keys()) for (const p of parents(h) ?? []) if (!distance.has(p)) distance.set(p, distance.get(h)! + 1)
    return distance
  }
  const fromA = ancestors(a)
  const fromB = ancestors(b)
  const common = [...fromA.keys()].filter((h) => fromB.has(h))
  const dominated = new Set(common.flatMap((h) => parents(h) ?? []))
  const score = (h: string) => fromA.get(h)! + fromB.get(h)!
  return common.filter((h) => !dominated.has(h)).sort((x, y) => score(x) - score(y) || (x < y ? -1 : x > y ? 1 : 0))
}
