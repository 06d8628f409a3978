import { describe, expect, it } from "@effect/vitest"
import { Objects } from "@grove/core"
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { tempDir } from "../../test/support.ts"
import { EMPTY_INDEX, indexColumns, reservedPaths } from "./TreeStatus.ts"
import { applySnapshot, readIndex, scan, writeIndex } from "./WorkingTree.ts"

const write = (root: string, file: string, text: string, mode = 0o644) =>
  Effect.promise(async () => {
    await fs.mkdir(path.dirname(path.join(root, file)), { recursive: true })
    await fs.writeFile(path.join(root, file), text, { mode })
  })

describe("WorkingTree", () => {
  it.effect("scans files with modes, symlinks as their target, and skips .grove and .git", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("scan")
      yield* write(root, "a/b/c.txt", "hello world")
      yield* write(root, "run.sh", "#!/bin/sh\n", 0o755)
      yield* write(root, ".grove/state.json", "{}")
      yield* write(root, ".git/HEAD", "ref")
      yield* write(root, "sub/.git/config", "x")
      yield* Effect.promise(() => fs.symlink("a/b/c.txt", path.join(root, "link")))
      const result = yield* scan(root, yield* readIndex(root))
      expect(Object.fromEntries(result.snapshot)).toEqual({
        "a/b/c.txt": { hash: "d74981efa70a0c880b8d8c1985d075dbcbf679b99a5f9914e5aaf96b831a9e24", mode: "regular" },
        "run.sh": { hash: Objects.Blake3.hash("#!/bin/sh\n"), mode: "executable" },
        link: { hash: Objects.Blake3.hash("a/b/c.txt"), mode: "symlink" }
      })
      expect(result.hashed).toBe(3)
      expect(result.invalid).toEqual([])
    }).pipe(Effect.scoped))

  it.effect("a new path a checkout takes for .grove, at any depth, cannot be committed (servers refuse it); a .grove folder is skipped", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("dotgrove")
      for (const file of ["d/.grove", "D/.GROVE/x", "grove~1/y", "e/.grove/z", "x.grove", "d/.grovex/w"]) yield* write(root, file, "x")
      const result = yield* scan(root, yield* readIndex(root))
      expect([...result.snapshot.keys()].sort()).toEqual(["d/.grovex/w", "x.grove"])
      expect(result.invalid.map((i) => i.path).sort()).toEqual(["D/.GROVE/x", "d/.grove", "grove~1/y"])
      expect(result.invalid.find((i) => i.path === "D/.GROVE/x")!.reason).toContain("'D/.GROVE' is taken for '.grove'")
    }).pipe(Effect.scoped))

  it.effect("a tracked path a checkout takes for .grove (an older client's) is listed, kept, and reads as deleted once gone", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("tracked-dotgrove")
      for (const file of ["a.txt", "d/g/x", "D/G/x", "e/g"]) yield* write(root, file, file)
      const clean = yield* scan(root, yield* readIndex(root))
      // As an older client's clone left it: the files under (or named) a .grove spelling, and tracked there.
      const moves = [["d/g", "d/.grove"], ["D/G", "D/.GROVE"], ["e/g", "e/.grove"]] as const
      for (const [from, to] of moves) yield* Effect.promise(() => fs.rename(path.join(root, from), path.join(root, to)))
      const rename = (file: string) => moves.reduce((at, [from, to]) => at.startsWith(from) ? to + at.slice(from.length) : at, file)
      yield* writeIndex(root, new Map([...clean.files].map(([file, entry]) => [rename(file), entry])), null)
      // No columns: no quick check (the no-op push's, status's, the scan's own) takes the tree as unchanged.
      expect(indexColumns(yield* readIndex(root))).toBeUndefined()
      expect(reservedPaths(yield* readIndex(root)).get("D/.GROVE/x")).toBe("D/.GROVE")
      const tracked = yield* scan(root, yield* readIndex(root))
      expect(tracked.invalid.map((i) => i.path).sort()).toEqual(["D/.GROVE/x", "d/.grove/x", "e/.grove"])
      expect(tracked.invalid.find((i) => i.path === "d/.grove/x")!.reason).toMatch(/^tracked, .*move it out of 'd\/\.grove'$/)
      expect(tracked.invalid.find((i) => i.path === "e/.grove")!.reason).toMatch(/rename it$/)
      // Never read as deleted while the file is there.
      expect([...tracked.snapshot.keys()].sort()).toEqual(["D/.GROVE/x", "a.txt", "d/.grove/x", "e/.grove"])
      expect(tracked.unchanged).toBe(false)

      yield* Effect.promise(() => fs.rm(path.join(root, "d/.grove/x")))
      yield* Effect.promise(() => fs.rename(path.join(root, "e/.grove"), path.join(root, "e/moved")))
      const moved = yield* scan(root, yield* readIndex(root))
      expect(moved.invalid.map((i) => i.path)).toEqual(["D/.GROVE/x"])
      expect([...moved.snapshot.keys()].sort()).toEqual(["D/.GROVE/x", "a.txt", "e/moved"])
    }).pipe(Effect.scoped))

  it.effect("the index spares unchanged files from hashing and notices changed ones", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("index")
      yield* write(root, "one.txt", "1")
      yield* write(root, "two.txt", "2")
      const first = yield* scan(root, yield* readIndex(root))
      // Files written before the index count as clean only when older than the index itself.
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      yield* writeIndex(root, first.files, null)
      const second = yield* scan(root, yield* readIndex(root))
      expect(second.hashed).toBe(0)
      yield* write(root, "two.txt", "22")
      const third = yield* scan(root, yield* readIndex(root))
      expect(third.hashed).toBe(1)
      expect(third.snapshot.get("two.txt")?.hash).toBe(Objects.Blake3.hash("22"))
    }).pipe(Effect.scoped))

  it.effect("reports paths that cannot be stored", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("invalid")
      yield* write(root, "bad\tname", "x")
      const result = yield* scan(root, yield* readIndex(root))
      expect(result.snapshot.size).toBe(0)
      expect(result.invalid.map((i) => i.path)).toEqual(["bad\tname"])
    }).pipe(Effect.scoped))

  it.effect("applySnapshot writes, moves and removes files, sets modes and prunes empty directories", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("apply")
      const store = yield* tempDir("store")
      yield* write(root, "keep.txt", "keep")
      yield* write(root, "old/dir/gone.txt", "gone")
      yield* write(root, "moved.txt", "moving")
      const scanned = yield* scan(root, yield* readIndex(root))
      const from = scanned.snapshot
      yield* write(store, "blob", "fresh")
      const fresh = Objects.Blake3.hash("fresh")
      const target = new Map([
        ["keep.txt", from.get("keep.txt")!],
        ["deep/moved.txt", from.get("moved.txt")!],
        ["bin/tool", { hash: fresh, mode: "executable" as const }],
        ["link", { hash: Objects.Blake3.hash("keep.txt"), mode: "symlink" as const }]
      ])
      yield* write(store, "linkblob", "keep.txt")
      const sources: Record<string, string> = { [fresh]: path.join(store, "blob"), [Objects.Blake3.hash("keep.txt")]: path.join(store, "linkblob") }
      const result = yield* applySnapshot(root, from, target, (h) => sources[h], scanned.files)
      expect(result.removed).toBe(2)
      const after = yield* scan(root, EMPTY_INDEX)
      expect(Object.fromEntries(after.snapshot)).toEqual(Object.fromEntries(target))
      expect(yield* Effect.promise(() => fs.readlink(path.join(root, "link")))).toBe("keep.txt")
      expect(yield* Effect.promise(() => fs.access(path.join(root, "old")).then(() => true, () => false))).toBe(false)
      expect(new Set(result.files.keys())).toEqual(new Set(target.keys()))
    }).pipe(Effect.scoped))
})
