import { describe, expect, it } from "@effect/vitest"
import { EMPTY_HASH, hash } from "../objects/Blake3.ts"
import { flattenTree } from "../objects/FileChanges.ts"
import { hashTree } from "../objects/Tree.ts"
import { build, randomFiles, seeded, snap } from "./Random.testing.ts"
import { buildTrees } from "./Snapshots.ts"

const A = hash("a")
const B = hash("b")



describe("Snapshots.buildTrees", () => {
  it("builds the empty tree for the empty snapshot", () => {
    const { root, trees } = build(new Map())
    expect(root).toBe(EMPTY_HASH)
    expect([...trees]).toEqual([[EMPTY_HASH, []]])
  })

  it("hashes every directory bottom-up in canonical order", () => {
    const { root, trees } = build(snap({ "b.txt": [A], "src/main.ts": [B, "executable"], "src/lib/x": [A], "a": [A, "symlink"] }))
    const lib = hashTree([{ name: "x", kind: "blob", hash: A, mode: "regular" }])
    const src = hashTree([
      { name: "lib", kind: "tree", hash: lib, mode: "tree" },
      { name: "main.ts", kind: "blob", hash: B, mode: "executable" }
    ])
    const expected = hashTree([
      { name: "a", kind: "blob", hash: A, mode: "symlink" },
      { name: "b.txt", kind: "blob", hash: A, mode: "regular" },
      { name: "src", kind: "tree", hash: src, mode: "tree" }
    ])
    expect(root).toBe(expected)
    expect(new Set(trees.keys())).toEqual(new Set([expected, src, lib]))
    expect(trees.get(root)?.map((e) => e.name)).toEqual(["a", "b.txt", "src"])
  })

  it("stores identical directories once", () => {
    const { trees } = build(snap({ "x/f": [A], "y/f": [A] }))
    expect(trees.size).toBe(2)
  })

  it("reports a path that is both a file and a directory, and invalid paths", () => {
    const clash = buildTrees(snap({ "a": [A], "a/b": [B] }))
    expect(clash.ok).toBe(false)
    expect(!clash.ok && clash.reason).toContain("'a' is both a file and a directory")
    for (const bad of ["/abs", "a//b", "a/../b", "a\tb", ""]) expect(buildTrees(snap({ [bad]: [A] })).ok, bad).toBe(false)
  })

  it("round-trips through flattenTree and ignores insertion order (random snapshots)", () => {
    const rnd = seeded(1)
    for (let round = 0; round < 200; round++) {
      const files = randomFiles(rnd, rnd.int(30))
      const built = buildTrees(files)
      // Random paths may collide as file and directory; those must be refused, everything else must round-trip.
      const clash = [...files.keys()].some((p) => [...files.keys()].some((q) => q.startsWith(`${p}/`)))
      expect(built.ok).toBe(!clash)
      if (!built.ok) continue
      const flat = flattenTree(built.root, (h) => built.trees.get(h))
      expect(flat.ok && flat.files).toEqual(files)
      const reversed = build(new Map([...files].reverse()))
      expect(reversed.root).toBe(built.root)
    }
  })
})
