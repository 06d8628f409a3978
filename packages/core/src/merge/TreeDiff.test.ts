import { describe, expect, it } from "@effect/vitest"
import { hash } from "../objects/Blake3.ts"
import { checkFileChangesAgree } from "../objects/FileChanges.ts"
import type { FileChange, Snapshot } from "../objects/FileChanges.ts"
import type { BlobMode, TreeEntry } from "../objects/Tree.ts"
import { build, mutate, randomSnapshot, seeded, snap } from "./Random.testing.ts"
import { diffSnapshots, diffTrees } from "./TreeDiff.ts"

const A = hash("a")
const B = hash("b")
const C = hash("c")



const summary = (changes: ReadonlyArray<FileChange>): Array<string> =>
  changes.map((c) => `${c.change_type} ${c.old_path == null ? "" : `${c.old_path} -> `}${c.path}`)

/** The paths whose file differs, each side restricted to them: what diffTrees must answer. */
const differing = (before: Snapshot, after: Snapshot): { before: Snapshot; after: Snapshot } => {
  const b = new Map()
  const a = new Map()
  for (const path of new Set([...before.keys(), ...after.keys()])) {
    const x = before.get(path)
    const y = after.get(path)
    if (x !== undefined && y !== undefined && x.hash === y.hash && x.mode === y.mode) continue
    if (x !== undefined) b.set(path, x)
    if (y !== undefined) a.set(path, y)
  }
  return { before: b, after: a }
}

describe("TreeDiff.diffSnapshots", () => {
  it("lists added, modified (content or mode) and deleted files with their modes, sorted by path", () => {
    const before = snap({ "keep": [A], "edit": [A], "chmod": [A], "gone": [B], "z/old": [C] })
    const after = snap({ "keep": [A], "edit": [B], "chmod": [A, "executable"], "new": [C, "symlink"], "z/old": [A] })
    expect(diffSnapshots(before, after)).toEqual([
      { path: "chmod", change_type: "modified", old_blob_hash: A, new_blob_hash: A, old_mode: "regular", new_mode: "executable" },
      { path: "edit", change_type: "modified", old_blob_hash: A, new_blob_hash: B, old_mode: "regular", new_mode: "regular" },
      { path: "gone", change_type: "deleted", old_blob_hash: B, new_blob_hash: null, old_mode: "regular" },
      { path: "new", change_type: "added", old_blob_hash: null, new_blob_hash: C, new_mode: "symlink" },
      { path: "z/old", change_type: "modified", old_blob_hash: C, new_blob_hash: A, old_mode: "regular", new_mode: "regular" }
    ])
    expect(diffSnapshots(before, before)).toEqual([])
  })

  it("pairs a deleted and an added file with the same blob as a rename, keeping modes", () => {
    const changes = diffSnapshots(snap({ "a/x.ts": [A], "other": [B] }), snap({ "b/x.ts": [A, "executable"], "other": [B] }))
    expect(changes).toEqual([
      { path: "b/x.ts", old_path: "a/x.ts", change_type: "renamed", old_blob_hash: A, new_blob_hash: A, old_mode: "regular", new_mode: "executable" }
    ])
  })

  it("pairs each deleted path with at most one added path, same file name first, then in path order", () => {
    const before = snap({ "old/a.txt": [A], "old/b.txt": [A], "old/c.txt": [A] })
    const after = snap({ "new/b.txt": [A], "new/q.txt": [A], "new/r.txt": [A], "new/s.txt": [A] })
    expect(summary(diffSnapshots(before, after))).toEqual([
      "renamed old/b.txt -> new/b.txt",
      "renamed old/a.txt -> new/q.txt",
      "renamed old/c.txt -> new/r.txt",
      "added new/s.txt"
    ])
    // More deletions than additions: the unpaired deletions stay deletions.
    expect(summary(diffSnapshots(after, snap({ "x": [A] })))).toEqual([
      "deleted new/q.txt",
      "deleted new/r.txt",
      "deleted new/s.txt",
      "renamed new/b.txt -> x"
    ])
  })

  it("does not pair files whose content differs, nor a path that still exists", () => {
    expect(summary(diffSnapshots(snap({ "a": [A] }), snap({ "b": [B] })))).toEqual(["deleted a", "added b"])
    expect(summary(diffSnapshots(snap({ "a": [A] }), snap({ "a": [A], "copy": [A] })))).toEqual(["added copy"])
  })

  it("handles a file replaced by a directory of the same name", () => {
    const before = snap({ "a": [A] })
    const after = snap({ "a/b": [A] })
    const changes = diffSnapshots(before, after)
    expect(summary(changes)).toEqual(["renamed a -> a/b"])
    expect(checkFileChangesAgree(changes, before, after)).toEqual({ ok: true })
  })

  it("answers the same whatever the maps' insertion order", () => {
    const rnd = seeded(7)
    for (let round = 0; round < 50; round++) {
      const before = randomSnapshot(rnd, 25)
      const after = mutate(rnd, before)
      const shuffled = (m: Snapshot): Snapshot => new Map([...m].sort(() => rnd.next() - 0.5))
      expect(diffSnapshots(shuffled(before), shuffled(after))).toEqual(diffSnapshots(before, after))
    }
  })

  it("always agrees with both snapshots (checkFileChangesAgree, 1000 random edits)", () => {
    const rnd = seeded(42)
    let renames = 0
    for (let round = 0; round < 1000; round++) {
      const before = randomSnapshot(rnd, rnd.int(40))
      const after = rnd.int(10) === 0 ? randomSnapshot(rnd, rnd.int(40)) : mutate(rnd, before)
      const changes = diffSnapshots(before, after)
      expect(checkFileChangesAgree(changes, before, after), JSON.stringify({ before: [...before], after: [...after] })).toEqual({ ok: true })
      const paths = changes.map((c) => c.path)
      expect(paths).toEqual([...new Set(paths)])
      renames += changes.filter((c) => c.change_type === "renamed").length
    }
    expect(renames).toBeGreaterThan(100) // the generator does exercise renames
  })
})

describe("TreeDiff.diffTrees", () => {
  const store = (...snapshots: Array<Snapshot>) => {
    const trees = new Map<string, ReadonlyArray<TreeEntry>>()
    const roots = snapshots.map((s) => {
      const built = build(s)
      for (const [h, entries] of built.trees) trees.set(h, entries)
      return built.root
    })
    const looked: Array<string> = []
    const lookup = (h: string) => {
      looked.push(h)
      return trees.get(h)
    }
    return { roots, lookup, looked, trees }
  }

  it("returns exactly the differing paths, and diffSnapshots on them equals the full diff (random trees)", () => {
    const rnd = seeded(3)
    for (let round = 0; round < 300; round++) {
      const before = randomSnapshot(rnd, rnd.int(40))
      const after = mutate(rnd, before)
      const { roots: [a, b], lookup } = store(before, after)
      const result = diffTrees(a as string, b as string, lookup)
      if (!result.ok) throw new Error(result.reason)
      expect({ before: result.before, after: result.after }).toEqual(differing(before, after))
      const changes = diffSnapshots(result.before, result.after)
      expect(changes).toEqual(diffSnapshots(before, after))
      expect(checkFileChangesAgree(changes, before, after)).toEqual({ ok: true })
    }
  })

  it("treats a null parent as the empty tree", () => {
    const files = snap({ "a/b": [A], "c": [B] })
    const { roots: [root], lookup } = store(files)
    const result = diffTrees(null, root as string, lookup)
    expect(result.ok && result.after).toEqual(files)
    expect(result.ok && result.before.size).toBe(0)
  })

  it("looks up only the changed path's directories in a 20,000-file tree", () => {
    const files = new Map<string, { hash: string; mode: BlobMode }>()
    for (let i = 0; i < 20_000; i++) files.set(`pkg${i % 20}/dir${i % 50}/sub${i % 7}/file${i}.ts`, { hash: hash(`content ${i}`), mode: "regular" })
    const edited = new Map(files).set("pkg3/dir3/sub1/file2003.ts", { hash: B, mode: "regular" })
    const { roots: [a, b], lookup, looked } = store(files, edited)
    const result = diffTrees(a as string, b as string, lookup)
    expect(result.ok && [...result.before.keys()]).toEqual(["pkg3/dir3/sub1/file2003.ts"])
    expect(result.ok && [...result.after.values()]).toEqual([{ hash: B, mode: "regular" }])
    // The work, counted instead of timed: root, pkg3, dir3, sub1 on each side.
    expect(looked.length).toBe(8)
  })

  it("fails on a missing tree, naming where it was needed", () => {
    const { roots: [a, b], trees } = store(snap({ "x/y": [A] }), snap({ "x/y": [B] }))
    const sub = (trees.get(b as string) as ReadonlyArray<TreeEntry>)[0]?.hash as string
    const result = diffTrees(a as string, b as string, (h) => (h === sub ? undefined : trees.get(h)))
    expect(result).toEqual({ ok: false, reason: `tree ${sub} (at 'x') is missing` })
    expect(diffTrees(a as string, C, (h) => trees.get(h))).toEqual({ ok: false, reason: `tree ${C} is missing` })
  })

  it("with the listed paths included, checks a files list exactly as the full manifests do", () => {
    const rnd = seeded(11)
    const kinds = ["added", "modified", "deleted", "renamed"] as const
    let disagreements = 0
    for (let round = 0; round < 400; round++) {
      const before = randomSnapshot(rnd, rnd.int(30))
      const after = mutate(rnd, before)
      const { roots: [a, b], lookup } = store(before, after)
      // The true list, or one spoiled: an extra no-op change, a dropped change, a wrong hash.
      const files: Array<FileChange> = [...diffSnapshots(before, after)]
      const all = [...before.keys(), ...after.keys()]
      const spoil = rnd.int(4)
      if (spoil === 1 && all.length > 0) {
        const path = rnd.pick(all)
        const old = before.get(path)?.hash ?? null
        const now = after.get(path)?.hash ?? null
        const type = rnd.pick(kinds)
        files.push({ path, change_type: type, old_blob_hash: type === "added" ? null : old ?? A, new_blob_hash: type === "deleted" ? null : now ?? A, ...(type === "renamed" ? { old_path: rnd.pick(all) } : {}) })
      } else if (spoil === 2 && files.length > 0) files.splice(rnd.int(files.length), 1)
      else if (spoil === 3 && files.length > 0) {
        const i = rnd.int(files.length)
        const f = files[i] as FileChange
        if (f.new_blob_hash !== null) files[i] = { ...f, new_blob_hash: C }
      }
      const named = files.flatMap((f) => (f.old_path == null ? [f.path] : [f.path, f.old_path]))
      const result = diffTrees(a as string, b as string, lookup, named)
      if (!result.ok) throw new Error(result.reason)
      const full = checkFileChangesAgree(files, before, after).ok
      expect(checkFileChangesAgree(files, result.before, result.after).ok, JSON.stringify(files)).toBe(full)
      if (!full) disagreements++
    }
    expect(disagreements).toBeGreaterThan(100) // spoiled lists were really exercised
  })
})
