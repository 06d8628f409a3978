import { describe, expect, it } from "@effect/vitest"
import { Objects } from "@grove/core"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir } from "../../test/support.ts"
import { directPlacer } from "./Placing.ts"
import { readIndex, scan, type Snapshot, writeIndex } from "./WorkingTree.ts"

const text = (s: string) => new TextEncoder().encode(s)
const blob = (s: string) => ({ hash: Objects.Blake3.hash(s), bytes: text(s) })

describe("Placing", () => {
  it.effect("writes every path of a blob with its exact mode (whatever the umask), symlinks and empty files; the entries spare the next scan any hashing", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("place")
      const same = blob("same bytes at two paths\n")
      const script = blob("#!/bin/sh\necho hi\n")
      const link = blob("a/b/one.txt")
      const empty = blob("")
      const to: Snapshot = new Map([
        ["a/b/one.txt", { hash: same.hash, mode: "regular" as const }],
        ["c/two.txt", { hash: same.hash, mode: "regular" as const }],
        ["bin/run.sh", { hash: script.hash, mode: "executable" as const }],
        ["link", { hash: link.hash, mode: "symlink" as const }],
        ["empty", { hash: empty.hash, mode: "regular" as const }]
      ])
      const placer = directPlacer(root, to)
      // A umask that would take bits from both modes: the files still get 0644 and 0755, as applySnapshot sets them.
      const umask = process.umask(0o077)
      try {
        for (const b of [same, script, link, empty]) expect(placer.place(b.hash, b.bytes)).toBe(true)
      } finally {
        process.umask(umask)
      }
      expect([...placer.placed.keys()].sort()).toEqual([...to.keys()].sort())
      expect(fs.readFileSync(path.join(root, "a/b/one.txt"), "utf8")).toBe("same bytes at two paths\n")
      expect(fs.readFileSync(path.join(root, "c/two.txt"), "utf8")).toBe("same bytes at two paths\n")
      expect(fs.statSync(path.join(root, "a/b/one.txt")).mode & 0o777).toBe(0o644)
      expect(fs.statSync(path.join(root, "bin/run.sh")).mode & 0o777).toBe(0o755)
      expect(fs.readlinkSync(path.join(root, "link"))).toBe("a/b/one.txt")
      expect(fs.statSync(path.join(root, "empty")).size).toBe(0)
      for (const [file, entry] of placer.placed) {
        const stats = fs.lstatSync(path.join(root, file))
        expect(entry).toEqual({ hash: to.get(file)!.hash, mode: to.get(file)!.mode, size: stats.size, mtimeMs: stats.mtimeMs, ino: stats.ino, ctimeMs: stats.ctimeMs })
      }
      // Past the files' clock tick (an index written in it would count them racily clean and hash them).
      const newest = Math.max(...[...placer.placed.values()].map((e) => Math.max(e.mtimeMs, e.ctimeMs ?? 0)))
      while (Date.now() <= newest + 1) yield* Effect.yieldNow
      yield* writeIndex(root, placer.placed, null)
      const scanned = yield* scan(root, yield* readIndex(root))
      expect(scanned.hashed).toBe(0)
      expect(scanned.unchanged).toBe(true)
      expect(Object.fromEntries(scanned.snapshot)).toEqual(Object.fromEntries(to))
    }).pipe(Effect.scoped))

  it.effect("never replaces what is there: an existing path is left alone and reported unwritten", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("place-existing")
      const b = blob("new content\n")
      fs.writeFileSync(path.join(root, "taken.txt"), "user's file\n")
      fs.writeFileSync(path.join(root, "dir"), "a file where the snapshot has a directory\n")
      const to: Snapshot = new Map([
        ["taken.txt", { hash: b.hash, mode: "regular" as const }],
        ["dir/inside.txt", { hash: b.hash, mode: "regular" as const }],
        ["free.txt", { hash: b.hash, mode: "regular" as const }]
      ])
      const placer = directPlacer(root, to)
      expect(placer.place(b.hash, b.bytes)).toBe(false)
      expect([...placer.placed.keys()]).toEqual(["free.txt"])
      expect(fs.readFileSync(path.join(root, "taken.txt"), "utf8")).toBe("user's file\n")
      expect(fs.readFileSync(path.join(root, "dir"), "utf8")).toBe("a file where the snapshot has a directory\n")
      expect(fs.readFileSync(path.join(root, "free.txt"), "utf8")).toBe("new content\n")
      // A blob the snapshot does not hold is nobody's: nothing written, nothing left over.
      expect(placer.place(Objects.Blake3.hash("other"), text("other"))).toBe(true)
      expect(fs.readdirSync(root).sort()).toEqual(["dir", "free.txt", "taken.txt"])
    }).pipe(Effect.scoped))

  it("joins paths as path.join would: a root with or without its trailing separator, top-level and nested files", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("place-join")
      const b = blob("joined\n")
      const to: Snapshot = new Map([
        ["top.txt", { hash: b.hash, mode: "regular" as const }],
        ["a/b/c/deep.txt", { hash: b.hash, mode: "regular" as const }]
      ])
      for (const [dir, given] of [["plain", path.join(root, "plain")], ["slashed", `${path.join(root, "slashed")}${path.sep}`]] as const) {
        fs.mkdirSync(path.join(root, dir))
        const placer = directPlacer(given, to)
        expect(placer.place(b.hash, b.bytes)).toBe(true)
        expect(fs.readFileSync(path.join(root, dir, "top.txt"), "utf8")).toBe("joined\n")
        expect(fs.readFileSync(path.join(root, dir, "a/b/c/deep.txt"), "utf8")).toBe("joined\n")
        expect(fs.readdirSync(path.join(root, dir)).sort()).toEqual(["a", "top.txt"])
      }
    }).pipe(Effect.scoped))
})
