import { describe, expect, it } from "@effect/vitest"
import { EMPTY_HASH, hash } from "../objects/Blake3.ts"
import { flattenTree } from "../objects/FileChanges.ts"
import { encodeTree, type TreeEntry } from "../objects/Tree.ts"
import { build, mutate, randomFiles, randomSnapshot, seeded, snap } from "./Random.testing.ts"
import { buildTrees } from "./Snapshots.ts"
import { mergeSnapshots } from "./ThreeWay.ts"
import { editsBetween, editTree, mergeTrees } from "./TreeMerge.ts"

const A = hash("a")
const B = hash("b")

/** A lookup over the trees of several builds that counts which trees were opened. */
const store = (...builds: ReadonlyArray<{ readonly trees: ReadonlyMap<string, ReadonlyArray<TreeEntry>> }>) => {
  const trees = new Map<string, ReadonlyArray<TreeEntry>>()
  for (const b of builds) for (const [h, e] of b.trees) trees.set(h, e)
  const opened = new Set<string>()
  return { opened, lookup: (h: string) => (opened.add(h), trees.get(h)) }
}

describe("TreeMerge.mergeTrees", () => {
  it("answers what mergeSnapshots answers on the flattened trees (random cases)", () => {
    for (let seed = 1; seed <= 200; seed++) {
      const rnd = seeded(seed)
      const base = randomSnapshot(rnd, rnd.int(30))
      const ours = mutate(rnd, base)
      const theirs = mutate(rnd, base)
      const [b, o, t] = [build(base), build(ours), build(theirs)]
      const { lookup } = store(b, o, t)
      const full = mergeSnapshots(base, ours, theirs)
      const merged = mergeTrees(b.root, o.root, t.root, lookup)
      if (!merged.ok) throw new Error(merged.reason)
      expect(merged.conflicts, `seed ${seed}`).toEqual(full.conflicts)
      // At the paths it reports, the result is the whole merge's; elsewhere the whole merge kept ours.
      for (const path of new Set([...merged.base.keys(), ...merged.ours.keys(), ...merged.theirs.keys()])) {
        expect(merged.merged.get(path), `seed ${seed} ${path}`).toEqual(full.merged.get(path))
      }
      for (const [path, file] of full.merged) {
        if (!merged.ours.has(path) && !merged.theirs.has(path) && !merged.base.has(path)) expect(ours.get(path)).toEqual(file)
      }
      // Applied to ours, the edits give the tree of the whole merge's result.
      const edited = editTree(o.root, editsBetween(merged.ours, merged.merged), lookup)
      const whole = buildTrees(full.merged)
      expect(edited.ok && whole.ok ? edited.root : edited.ok, `seed ${seed}`).toEqual(whole.ok ? whole.root : false)
    }
  })

  it("opens only the directories on the way to what changed", () => {
    const files: Record<string, readonly [string]> = {}
    for (let d = 0; d < 50; d++) for (let f = 0; f < 20; f++) files[`dir${d}/f${f}`] = [hash(`${d}/${f}`)]
    const base = snap(files)
    const ours = new Map(base).set("dir1/f1", { hash: A, mode: "regular" })
    const theirs = new Map(base).set("dir2/new", { hash: B, mode: "regular" })
    const [b, o, t] = [build(base), build(ours), build(theirs)]
    const { lookup, opened } = store(b, o, t)
    const merged = mergeTrees(b.root, o.root, t.root, lookup)
    if (!merged.ok) throw new Error(merged.reason)
    expect(merged.conflicts).toEqual([])
    expect([...merged.merged.keys()].sort()).toEqual(["dir1/f1", "dir2/new"])
    const edited = editTree(o.root, editsBetween(merged.ours, merged.merged), lookup)
    expect(edited.ok && edited.root).toEqual(build(new Map(ours).set("dir2/new", { hash: B, mode: "regular" })).root)
    // Three roots, three dir1 and three dir2 trees at most: not the 50 directories.
    expect(opened.size).toBeLessThanOrEqual(9)
  })
})

describe("TreeMerge.editTree", () => {
  it("builds what buildTrees builds for the edited snapshot, rebuilding only changed directories (random cases)", () => {
    for (let seed = 1; seed <= 200; seed++) {
      const rnd = seeded(seed)
      const before = randomSnapshot(rnd, rnd.int(30))
      const b = build(before)
      // Sometimes an invalid result (a file that is also a directory), which both must refuse.
      const after = rnd.int(4) === 0 ? new Map([...mutate(rnd, before), ...randomFiles(rnd, 2)]) : mutate(rnd, before)
      const whole = buildTrees(after)
      const edited = editTree(b.root, editsBetween(before, after), store(b).lookup)
      expect(edited.ok, `seed ${seed}`).toEqual(whole.ok)
      if (!edited.ok || !whole.ok) continue
      expect(edited.root).toEqual(whole.root)
      for (const [h, entries] of edited.trees) expect(whole.trees.get(h)).toEqual(entries)
      // Each rebuilt tree's body is its canonical text, the one its hash is of.
      expect([...edited.bodies.keys()]).toEqual([...edited.trees.keys()])
      for (const [h, body] of edited.bodies) {
        expect(body).toBe(encodeTree(edited.trees.get(h)!))
        expect(hash(body)).toBe(h)
      }
      const flat = flattenTree(edited.root, (h) => edited.trees.get(h) ?? whole.trees.get(h))
      expect(flat.ok && flat.files).toEqual(after)
    }
  })

  it("turns a file into a directory and back, drops emptied directories, and refuses clashes and bad names", () => {
    const b = build(snap({ "a": [A], "d/x": [A], "d/y": [B] }))
    const { lookup } = store(b)
    const swapped = editTree(b.root, new Map([["a", undefined], ["a/inner", { hash: B, mode: "regular" }], ["d/x", undefined], ["d/y", undefined], ["d", { hash: A, mode: "executable" }]]), lookup)
    expect(swapped.ok && swapped.root).toEqual(build(snap({ "a/inner": [B], "d": [A, "executable"] })).root)
    const emptied = editTree(b.root, new Map([["a", undefined], ["d/x", undefined], ["d/y", undefined]]), lookup)
    expect(emptied.ok && emptied.root).toEqual(EMPTY_HASH)
    expect(editTree(b.root, new Map([["a/inner", { hash: B, mode: "regular" }]]), lookup).ok).toBe(false)
    expect(editTree(b.root, new Map([["d", { hash: B, mode: "regular" }]]), lookup).ok).toBe(false)
    expect(editTree(b.root, new Map([["bad/../x", { hash: B, mode: "regular" }]]), lookup).ok).toBe(false)
    expect(editTree(hash("nowhere"), new Map([["x", { hash: B, mode: "regular" }]]), lookup)).toMatchObject({ ok: false })
  })
})
