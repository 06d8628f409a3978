import { describe, expect, it } from "@effect/vitest"
import { Merge, Objects } from "@grove/core"
import { buildTreesFrom } from "./TreeBuild.ts"

type Entry = { readonly hash: string; readonly mode: Objects.Tree.BlobMode }

const blob = (text: string): string => Objects.Blake3.hash(text)

/** A deterministic generator (mulberry32). */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const expectSameAsCore = (snapshot: ReadonlyMap<string, Entry>, built: ReturnType<typeof buildTreesFrom>) => {
  const core = Merge.Snapshots.buildTrees(snapshot)
  if (!core.ok || !built.ok) throw new Error("both builds should succeed")
  expect(built.root).toBe(core.root)
  for (const [hash, entries] of built.trees) expect(core.trees.get(hash)).toEqual(entries)
  expect(new Set(built.dirs.values())).toEqual(new Set(core.trees.keys()))
}

describe("TreeBuild", () => {
  it("builds the same trees as core, from scratch and after random edits reusing unchanged directories", () => {
    const next = random(7)
    const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(next() * items.length)]!
    const dirs = ["", "a", "a/b", "a/b/c", "d", "d/e", "f"]
    const snapshot = new Map<string, Entry>()
    for (let i = 0; i < 60; i++) {
      const dir = pick(dirs)
      snapshot.set(`${dir === "" ? "" : `${dir}/`}file${i}.txt`, { hash: blob(`v${i}`), mode: "regular" })
    }
    let built = buildTreesFrom(snapshot)
    expectSameAsCore(snapshot, built)
    for (let round = 0; round < 40; round++) {
      const before = new Map(snapshot)
      const paths = [...snapshot.keys()]
      const edits = 1 + Math.floor(next() * 4)
      for (let e = 0; e < edits; e++) {
        const kind = next()
        if (kind < 0.3 && paths.length > 0) snapshot.set(pick(paths), { hash: blob(`r${round}e${e}`), mode: "regular" })
        else if (kind < 0.45 && paths.length > 0) snapshot.set(pick(paths), { hash: snapshot.get(pick(paths))!.hash, mode: "executable" })
        else if (kind < 0.7 && paths.length > 1) snapshot.delete(pick(paths))
        else {
          const dir = `${pick(dirs)}/new${round}`.replace(/^\//, "")
          snapshot.set(`${dir}/n${e}.txt`, { hash: blob(`n${round}${e}`), mode: "symlink" })
        }
      }
      if (!built.ok) throw new Error("unreachable")
      const incremental = buildTreesFrom(snapshot, { snapshot: before, dirs: built.dirs })
      expectSameAsCore(snapshot, incremental)
      if (!incremental.ok) throw new Error("unreachable")
      // Only changed directories are rebuilt: never more trees than directories touched.
      expect(incremental.trees.size).toBeLessThanOrEqual(incremental.dirs.size)
      built = incremental
    }
  })

  it("rebuilds only the directories on the path of a change", () => {
    const snapshot = new Map<string, Entry>([
      ["x/1.txt", { hash: blob("1"), mode: "regular" }],
      ["y/z/2.txt", { hash: blob("2"), mode: "regular" }],
      ["top.txt", { hash: blob("t"), mode: "regular" }]
    ])
    const first = buildTreesFrom(snapshot)
    if (!first.ok) throw new Error("should build")
    const changed = new Map(snapshot).set("y/z/2.txt", { hash: blob("2'"), mode: "regular" })
    const second = buildTreesFrom(changed, { snapshot, dirs: first.dirs })
    if (!second.ok) throw new Error("should build")
    expect(second.trees.size).toBe(3) // y/z, y and the root; x is reused
    expect(second.dirs.get("x")).toBe(first.dirs.get("x"))
    expectSameAsCore(changed, second)
  })

  it("refuses invalid new paths and a path that is both a file and a directory", () => {
    const base = new Map<string, Entry>([["a/b.txt", { hash: blob("b"), mode: "regular" }]])
    expect(buildTreesFrom(new Map(base).set("bad\tname", { hash: blob("x"), mode: "regular" })).ok).toBe(false)
    const clash = buildTreesFrom(new Map(base).set("a", { hash: blob("a"), mode: "regular" }))
    expect(clash).toMatchObject({ ok: false, reason: expect.stringContaining("both a file and a directory") })
    const built = buildTreesFrom(base)
    if (!built.ok) throw new Error("should build")
    expect(buildTreesFrom(new Map(base).set("a", { hash: blob("a"), mode: "regular" }), { snapshot: base, dirs: built.dirs }).ok).toBe(false)
  })

  it("the empty snapshot is the empty tree", () => {
    const built = buildTreesFrom(new Map())
    expect(built).toMatchObject({ ok: true, root: Objects.Blake3.EMPTY_HASH })
  })
})
