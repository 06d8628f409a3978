import { describe, expect, it } from "@effect/vitest"
import { hash } from "../objects/Blake3.ts"
import { checkPathSet } from "../objects/Path.ts"
import { mutate, randomSnapshot, seeded, snap } from "./Random.testing.ts"
import { mergeSnapshots } from "./ThreeWay.ts"
import type { Conflict } from "./ThreeWay.ts"

const A = hash("a")
const B = hash("b")
const C = hash("c")


const swapKind = (c: Conflict): Conflict => ({
  path: c.path,
  kind: c.kind === "modify_delete" ? "delete_modify" : c.kind === "delete_modify" ? "modify_delete" : c.kind
})

describe("ThreeWay.mergeSnapshots", () => {
  it("takes each side's changes when they touch different files, or agree", () => {
    const base = snap({ "same": [A], "ours-edit": [A], "theirs-edit": [A], "ours-del": [A], "theirs-del": [A], "both-edit": [A], "both-del": [A] })
    const ours = snap({ "same": [A], "ours-edit": [B], "theirs-edit": [A], "theirs-del": [A], "both-edit": [C], "ours-add": [B], "both-add": [C, "executable"] })
    const theirs = snap({ "same": [A], "ours-edit": [A], "theirs-edit": [B, "executable"], "ours-del": [A], "both-edit": [C], "theirs-add": [A], "both-add": [C, "executable"] })
    const result = mergeSnapshots(base, ours, theirs)
    expect(result.conflicts).toEqual([])
    expect(result.merged).toEqual(snap({
      "same": [A],
      "ours-edit": [B],
      "theirs-edit": [B, "executable"],
      "both-edit": [C],
      "ours-add": [B],
      "theirs-add": [A],
      "both-add": [C, "executable"]
    }))
  })

  it("treats content and mode as one identity: one side's edit and the other's chmod conflict", () => {
    const result = mergeSnapshots(snap({ f: [A] }), snap({ f: [B] }), snap({ f: [A, "executable"] }))
    expect(result).toEqual({ merged: snap({ f: [B] }), conflicts: [{ path: "f", kind: "content" }] })
    const modes = mergeSnapshots(snap({ f: [A] }), snap({ f: [A, "symlink"] }), snap({ f: [A, "executable"] }))
    expect(modes.conflicts).toEqual([{ path: "f", kind: "mode" }])
  })

  it("reports every conflict kind, sorted by path, keeping ours at conflicting paths", () => {
    const base = snap({ "content": [A], "mod-del": [A], "del-mod": [A], "mode": [A], "both-mode-content": [A] })
    const ours = snap({ "content": [B], "mod-del": [B], "mode": [A, "executable"], "add": [A], "both-mode-content": [B, "executable"], "file": [A] })
    const theirs = snap({ "content": [C], "del-mod": [B], "mode": [A, "symlink"], "add": [B], "both-mode-content": [C, "symlink"], "file/inner": [A] })
    const result = mergeSnapshots(base, ours, theirs)
    expect(result.conflicts).toEqual([
      { path: "add", kind: "add_add" },
      { path: "both-mode-content", kind: "content" },
      { path: "content", kind: "content" },
      { path: "del-mod", kind: "delete_modify" },
      { path: "file", kind: "file_directory" },
      { path: "file/inner", kind: "file_directory" },
      { path: "mod-del", kind: "modify_delete" },
      { path: "mode", kind: "mode" }
    ])
    expect(result.merged).toEqual(snap({ "content": [B], "mod-del": [B], "mode": [A, "executable"], "add": [A], "both-mode-content": [B, "executable"], "file": [A] }))
  })

  it("reports an add/add that differs only in mode", () => {
    expect(mergeSnapshots(new Map(), snap({ x: [A] }), snap({ x: [A, "executable"] })).conflicts).toEqual([{ path: "x", kind: "add_add" }])
  })

  it("reports a directory replaced by a file on one side while the other adds below it", () => {
    // Ours turns directory d into a file; theirs adds d/new. The file and everything below it conflict.
    const base = snap({ "d/old": [A], "keep": [A] })
    const ours = snap({ "d": [B], "keep": [A] })
    const theirs = snap({ "d/old": [A], "d/new": [C], "d/sub/deeper": [C], "keep": [B] })
    const result = mergeSnapshots(base, ours, theirs)
    expect(result.conflicts).toEqual([
      { path: "d", kind: "file_directory" },
      { path: "d/new", kind: "file_directory" },
      { path: "d/sub/deeper", kind: "file_directory" }
    ])
    expect(result.merged).toEqual(snap({ "d": [B], "keep": [B] }))
  })

  it("lists the other side's directory when it conflicts with a file deleted on ours", () => {
    // Theirs modified file a; ours deleted it and made a directory a/.
    const base = snap({ a: [A] })
    const ours = snap({ "a/x": [B] })
    const theirs = snap({ a: [C] })
    const forward = mergeSnapshots(base, ours, theirs)
    expect(forward.conflicts).toEqual([{ path: "a", kind: "delete_modify" }, { path: "a/x", kind: "file_directory" }])
    expect(forward.merged).toEqual(ours)
    expect(mergeSnapshots(base, theirs, ours).conflicts).toEqual(forward.conflicts.map(swapKind))
  })

  it("on random edits: valid result, symmetric conflicts, one-sided edits merge cleanly", () => {
    const rnd = seeded(9)
    let conflicted = 0
    for (let round = 0; round < 800; round++) {
      const base = randomSnapshot(rnd, rnd.int(30))
      const ours = mutate(rnd, base)
      const theirs = mutate(rnd, base)
      const result = mergeSnapshots(base, ours, theirs)
      expect(checkPathSet(result.merged.keys())).toEqual({ ok: true })
      const paths = result.conflicts.map((c) => c.path)
      expect(paths).toEqual([...paths].sort())
      expect(new Set(paths).size).toBe(paths.length)
      expect(mergeSnapshots(base, theirs, ours).conflicts).toEqual(result.conflicts.map(swapKind))
      if (result.conflicts.length > 0) conflicted++
      // Paths outside the conflicts hold the three-way answer.
      for (const path of new Set([...base.keys(), ...ours.keys(), ...theirs.keys()])) {
        if (paths.includes(path)) continue
        const b = JSON.stringify(base.get(path))
        const o = JSON.stringify(ours.get(path))
        const t = JSON.stringify(theirs.get(path))
        const m = JSON.stringify(result.merged.get(path))
        if (o === b) expect(m).toBe(t)
        else if (t === b) expect(m).toBe(o)
      }
      expect(mergeSnapshots(base, ours, base)).toEqual({ merged: ours, conflicts: [] })
      expect(mergeSnapshots(base, base, theirs)).toEqual({ merged: theirs, conflicts: [] })
      expect(mergeSnapshots(base, ours, ours)).toEqual({ merged: ours, conflicts: [] })
    }
    expect(conflicted).toBeGreaterThan(100)
  })
})
