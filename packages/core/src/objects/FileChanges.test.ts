import { describe, expect, it } from "@effect/vitest"
import { hash } from "./Blake3.ts"
import { checkFileChange, checkFileChangesAgree, flattenTree } from "./FileChanges.ts"
import type { FileChange, Snapshot } from "./FileChanges.ts"
import { hashTree } from "./Tree.ts"
import type { BlobMode, TreeEntry } from "./Tree.ts"

const A = hash("a")
const B = hash("b")
const C = hash("c")

const snap = (files: Record<string, readonly [string, BlobMode?]>): Snapshot =>
  new Map(Object.entries(files).map(([path, [h, mode]]) => [path, { hash: h, mode: mode ?? "regular" }]))

const added = (path: string, h: string): FileChange => ({ path, change_type: "added", old_blob_hash: null, new_blob_hash: h })
const deleted = (path: string, h: string): FileChange => ({ path, change_type: "deleted", old_blob_hash: h, new_blob_hash: null })
const modified = (path: string, from: string, to: string): FileChange => ({ path, change_type: "modified", old_blob_hash: from, new_blob_hash: to })
const renamed = (from: string, path: string, h: string, to = h): FileChange => ({ path, old_path: from, change_type: "renamed", old_blob_hash: h, new_blob_hash: to })

describe("FileChanges.checkFileChange", () => {
  it("accepts each change type with the fields it needs", () => {
    for (const c of [added("a", A), deleted("a", A), modified("a", A, B), renamed("a", "b", A), { ...modified("x", A, A), old_mode: "regular" as const, new_mode: "executable" as const }]) {
      expect(checkFileChange(c).ok, JSON.stringify(c)).toBe(true)
    }
  })

  it("rejects missing or extra hashes, bad hashes, modes, paths and renames", () => {
    const bad: Array<FileChange> = [
      { ...added("a", A), old_blob_hash: B },
      { ...added("a", A), new_blob_hash: null },
      { ...deleted("a", A), new_blob_hash: B },
      { ...deleted("a", A), old_blob_hash: null },
      { ...modified("a", A, B), old_blob_hash: null },
      modified("a", A, B.toUpperCase()),
      added("a/../b", A),
      added("/a", A),
      added("a\tb", A),
      { ...added("a", A), new_mode: "tree" as BlobMode },
      { ...added("a", A), change_type: "copied" as FileChange["change_type"] },
      { ...renamed("a", "b", A), old_path: undefined },
      renamed("a", "a", A),
      renamed("a//", "b", A)
    ]
    for (const c of bad) expect(checkFileChange(c).ok, JSON.stringify(c)).toBe(false)
  })
})

describe("FileChanges.flattenTree", () => {
  it("lists every file under a root by full path and reports missing trees", () => {
    const sub: Array<TreeEntry> = [{ name: "x.ts", kind: "blob", hash: B, mode: "executable" }]
    const root: Array<TreeEntry> = [{ name: "a", kind: "blob", hash: A, mode: "regular" }, { name: "src", kind: "tree", hash: hashTree(sub), mode: "tree" }]
    const trees = new Map([[hashTree(sub), sub], [hashTree(root), root]])
    const flat = flattenTree(hashTree(root), (h) => trees.get(h))
    expect(flat).toEqual({ ok: true, files: snap({ a: [A], "src/x.ts": [B, "executable"] }) })
    expect(flattenTree(hashTree([]), () => []).ok).toBe(true)
    trees.delete(hashTree(sub))
    expect(flattenTree(hashTree(root), (h) => trees.get(h)).ok).toBe(false)
  })
})

describe("FileChanges.checkFileChangesAgree", () => {
  const before = snap({ a: [A], b: [B], "d/c": [C] })

  it("accepts a list that turns the parent into the commit, in any order", () => {
    expect(checkFileChangesAgree([added("a", A)], new Map(), snap({ a: [A] })).ok).toBe(true)
    expect(checkFileChangesAgree([], before, before).ok).toBe(true)
    const after = snap({ a: [B], c: [C], "d/c": [C], e: [A, "executable"] })
    const changes = [modified("a", A, B), deleted("b", B), added("c", C), { ...added("e", A), new_mode: "executable" as const }]
    expect(checkFileChangesAgree(changes, before, after).ok).toBe(true)
    expect(checkFileChangesAgree([...changes].reverse(), before, after).ok).toBe(true)
    // Renamed away from `a`, and a new `a` in the same commit.
    expect(checkFileChangesAgree([added("a", C), renamed("a", "z", A)], before, snap({ a: [C], b: [B], "d/c": [C], z: [A] })).ok).toBe(true)
    // A mode-only change.
    expect(checkFileChangesAgree([{ ...modified("a", A, A), new_mode: "executable" }], before, snap({ a: [A, "executable"], b: [B], "d/c": [C] })).ok).toBe(true)
  })

  it("rejects lists that disagree with either manifest", () => {
    const reject = (files: Array<FileChange>, after: Snapshot, from: Snapshot = before) => expect(checkFileChangesAgree(files, from, after).ok, JSON.stringify(files)).toBe(false)
    reject([], snap({ a: [A], b: [B] })) // unlisted deletion
    reject([], snap({ a: [B], b: [B], "d/c": [C] })) // unlisted modification
    reject([], snap({ a: [A, "executable"], b: [B], "d/c": [C] })) // unlisted mode change
    reject([added("x", A)], before) // listed but absent
    reject([added("a", A)], before) // already exists
    reject([deleted("x", A)], before) // not in the parent
    reject([deleted("a", B)], snap({ b: [B], "d/c": [C] })) // wrong old hash
    reject([modified("a", A, B)], snap({ a: [C], b: [B], "d/c": [C] })) // wrong new hash
    reject([{ ...modified("a", A, B), old_mode: "symlink" }], snap({ a: [B], b: [B], "d/c": [C] }))
    reject([{ ...modified("a", A, B), new_mode: "symlink" }], snap({ a: [B], b: [B], "d/c": [C] }))
    reject([deleted("a", A), modified("a", A, B)], snap({ a: [B], b: [B], "d/c": [C] })) // changed twice
    reject([renamed("a", "b", A)], snap({ b: [A], "d/c": [C] })) // target exists
    reject([modified("a", A, B)], snap({ a: [B] }), new Map()) // root commit has no parent files
  })
})
