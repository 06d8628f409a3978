import { describe, expect, it } from "@effect/vitest"
import { Objects } from "@grove/core"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir } from "../../test/support.ts"
import type { IndexEntry } from "./TreeStatus.ts"
import { EMPTY_INDEX, indexPath, parseIndex, parseIndexBytes, readIndexSync, serializeIndex, treeUnchanged } from "./TreeStatus.ts"
import { readIndex, scan, writeIndex } from "./WorkingTree.ts"

const HOUR = 3600

/** Writes a file whose mtime is an hour ago: older than any index written now, so never racily clean. */
const writeOld = (root: string, file: string, text: string, mode = 0o644) => {
  const absolute = path.join(root, file)
  fs.mkdirSync(path.dirname(absolute), { recursive: true })
  fs.writeFileSync(absolute, text, { mode })
  const past = Date.now() / 1000 - HOUR
  fs.utimesSync(absolute, past, past)
}

/** A tree with an index written after it, based on commit "c1". */
const indexed = Effect.gen(function*() {
  const root = yield* tempDir("status")
  writeOld(root, "a.txt", "alpha")
  writeOld(root, "dir/b.txt", "beta")
  writeOld(root, "run.sh", "#!/bin/sh\n", 0o755)
  fs.symlinkSync("a.txt", path.join(root, "link"))
  const past = Date.now() / 1000 - HOUR
  fs.lutimesSync(path.join(root, "link"), past, past)
  writeOld(root, ".grove/state.json", "{}")
  const scanned = yield* scan(root, yield* readIndex(root))
  yield* writeIndex(root, scanned.files, "c1", new Map([["", "r"], ["dir", "d"]]))
  return root
})

describe("TreeStatus", () => {
  it.effect("an untouched tree matches its index; the index keeps its base and directory hashes", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const index = readIndexSync(root)
      expect(index.base).toBe("c1")
      expect(Object.fromEntries(index.dirs)).toEqual({ "": "r", dir: "d" })
      expect(index.files.size).toBe(4)
      expect(treeUnchanged(root, index)).toBe(true)
      const rescanned = yield* scan(root, index)
      expect(rescanned).toMatchObject({ hashed: 0, unchanged: true })
    }).pipe(Effect.scoped))

  it.effect("notices a changed, added, removed, chmod-ed or retyped file", () =>
    Effect.gen(function*() {
      const cases: Array<[string, (root: string) => void]> = [
        ["same-size rewrite", (root) => fs.writeFileSync(path.join(root, "a.txt"), "ALPHA")],
        ["added", (root) => fs.writeFileSync(path.join(root, "dir/new.txt"), "new")],
        ["removed", (root) => fs.rmSync(path.join(root, "dir/b.txt"))],
        ["chmod +x", (root) => fs.chmodSync(path.join(root, "a.txt"), 0o755)],
        ["chmod -x", (root) => fs.chmodSync(path.join(root, "run.sh"), 0o644)],
        ["link -> file", (root) => {
          fs.rmSync(path.join(root, "link"))
          fs.writeFileSync(path.join(root, "link"), "a.txt")
        }]
      ]
      for (const [label, change] of cases) {
        const root = yield* indexed
        change(root)
        const index = readIndexSync(root)
        expect({ label, unchanged: treeUnchanged(root, index) }).toEqual({ label, unchanged: false })
        expect({ label, unchanged: (yield* scan(root, index)).unchanged }).toEqual({ label, unchanged: false })
      }
    }).pipe(Effect.scoped))

  it.effect("a file modified no earlier than the index was written is not trusted (racily clean)", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const future = Date.now() / 1000 + HOUR
      fs.utimesSync(path.join(root, "a.txt"), future, future)
      const scanned = yield* scan(root, readIndexSync(root))
      // Its stat now matches a fresh index entry, but that entry is younger than the index file.
      yield* writeIndex(root, scanned.files, "c1")
      const index = readIndexSync(root)
      expect(treeUnchanged(root, index)).toBe(false)
      expect((yield* scan(root, index)).hashed).toBe(1)
    }).pipe(Effect.scoped))

  it.effect("the racy rule uses the index file's own mtime when it is earlier than the recorded time", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const fromFile = parseIndexBytes(fs.readFileSync(indexPath(root)), 1000)
      expect(fromFile.writtenAt).toBe(1000)
      expect(treeUnchanged(root, fromFile)).toBe(false) // every file is "newer" than a 1970 index
    }).pipe(Effect.scoped))

  it.effect("a stale entry whose stat matches exactly is re-hashed while racily clean, and trusted once older than the index", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const file = path.join(root, "a.txt")
      const stale = readIndexSync(root).files.get("a.txt")!
      // Changed within one clock tick of being indexed: same size, and the stat the index now sees is the file's.
      fs.writeFileSync(file, "ALPHA")
      const stats = fs.lstatSync(file)
      const entry = { ...stale, mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs, ino: stats.ino, size: stats.size }
      const at = (writtenAt: number) => ({ ...readIndexSync(root), writtenAt, files: new Map([...readIndexSync(root).files, ["a.txt", entry]]) })
      const fresh = Objects.Blake3.hash("ALPHA")
      // Index written in the same tick as the change (mtime == index time): not trusted, re-hashed.
      const racy = yield* scan(root, at(stats.mtimeMs))
      expect(treeUnchanged(root, at(stats.mtimeMs))).toBe(false)
      expect({ hashed: racy.hashed, hash: racy.snapshot.get("a.txt")?.hash }).toEqual({ hashed: 1, hash: fresh })
      // The same stale entry in an index written a tick later is trusted: the rule, not luck, caught it above.
      const trusted = yield* scan(root, at(stats.mtimeMs + 1))
      expect({ hashed: trusted.hashed, hash: trusted.snapshot.get("a.txt")?.hash }).toEqual({ hashed: 0, hash: stale.hash })
    }).pipe(Effect.scoped))

  it.effect("a same-size rewrite whose mtime was put back (touch -r, rsync -t) is seen by its ctime", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const file = path.join(root, "dir/b.txt")
      const before = fs.lstatSync(file)
      // ctime has a coarse clock tick: wait until it has moved past the indexed one.
      while (Date.now() <= before.ctimeMs + 20) yield* Effect.promise(() => new Promise((done) => setTimeout(done, 5)))
      fs.writeFileSync(file, "BETA")
      fs.utimesSync(file, before.atime, before.mtime)
      const after = fs.lstatSync(file)
      expect({ size: after.size, mtimeMs: after.mtimeMs, ino: after.ino }).toEqual({ size: before.size, mtimeMs: before.mtimeMs, ino: before.ino })
      const index = readIndexSync(root)
      expect(treeUnchanged(root, index)).toBe(false)
      const scanned = yield* scan(root, index)
      expect({ hashed: scanned.hashed, hash: scanned.snapshot.get("dir/b.txt")?.hash }).toEqual({ hashed: 1, hash: Objects.Blake3.hash("BETA") })
    }).pipe(Effect.scoped))

  it.effect("an index without ctimes (older client) is still trusted, and gains them on the next scan", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      // The second layout (an array per file) without the ctime column.
      const { base, dirs, files, writtenAt } = readIndexSync(root)
      const rows = [...files].map(([file, e]) => [file, e.hash, e.mode, e.size, e.mtimeMs, e.ino])
      const legacy = parseIndex(JSON.stringify({ written_at: writtenAt, base, files: rows, dirs: [...dirs] }), Date.now())
      expect([...legacy.files.values()].every((e) => e.ctimeMs === undefined)).toBe(true)
      expect(treeUnchanged(root, legacy)).toBe(true)
      const scanned = yield* scan(root, legacy)
      expect(scanned.hashed).toBe(0)
      expect([...scanned.files.values()].every((e) => typeof e.ctimeMs === "number")).toBe(true)
    }).pipe(Effect.scoped))

  it("writes the index in binary columns and reads back what it wrote; the previous JSON columns still read", () => {
    const entry = (c: string, size: number, ctimeMs?: number): IndexEntry =>
      ({ hash: c.repeat(64), mode: "regular", size, mtimeMs: 1.5 + size, ino: 7 + size, ...(ctimeMs === undefined ? {} : { ctimeMs }) })
    const files = new Map<string, IndexEntry>([
      ["a.txt", entry("a", 1, 1234.25)],
      ["dir/é ü.md", { ...entry("b", 2, 99), mode: "executable" }],
      ["dir/sub/link", { ...entry("c", 3, 5), mode: "symlink" }],
      ["old.txt", entry("d", 4)] // no ctime (an entry from before it was kept)
    ])
    const dirs = new Map([["", "e".repeat(64)], ["dir", "f".repeat(64)]])
    const folders = new Map([["", { mtimeMs: 1, ctimeMs: 2, ino: 3 }], ["dir", { mtimeMs: 4.5, ctimeMs: -1, ino: 6 }]])
    const bytes = serializeIndex(files, "9".repeat(64), dirs, 5000, folders)
    for (const index of [parseIndexBytes(bytes, 6000), parseIndexBytes(Buffer.concat([Buffer.alloc(3), bytes]).subarray(3), 6000)]) {
      expect({ writtenAt: index.writtenAt, base: index.base, files: [...index.files], dirs: [...index.dirs], folders: [...index.folders] })
        .toEqual({ writtenAt: 5000, base: "9".repeat(64), files: [...files], dirs: [...dirs], folders: [...folders] })
    }
    expect(parseIndexBytes(serializeIndex(new Map(), null, new Map(), 10), 20)).toMatchObject({ writtenAt: 10, base: null })
    expect(parseIndexBytes(serializeIndex(new Map(), null, new Map(), 10), 20).files.size).toBe(0)
    // Cut short, or one byte more: empty (re-hashing), never a wrong entry.
    expect(parseIndexBytes(bytes.subarray(0, bytes.length - 1), 6000)).toBe(EMPTY_INDEX)
    expect(parseIndexBytes(Buffer.concat([bytes, Buffer.from("x")]), 6000)).toBe(EMPTY_INDEX)
    // The previous layout (JSON columns, ctime null when unknown), as a client before this one wrote it.
    const columns = {
      written_at: 5000,
      base: "9".repeat(64),
      paths: [...files.keys()],
      hashes: [...files.values()].map((e) => e.hash).join(""),
      modes: "rxlr",
      stats: [...files.values()].flatMap((e) => [e.size, e.mtimeMs, e.ino, e.ctimeMs ?? null]),
      dirs: [...dirs],
      folders: [...folders].flatMap(([dir, f]) => [dir, f.mtimeMs, f.ctimeMs, f.ino])
    }
    const previous = parseIndexBytes(Buffer.from(`${JSON.stringify(columns)}\n`), 6000)
    // Its directories are not trusted: recorded before a directory holding its own .grove was skipped, each is read again.
    expect({ files: [...previous.files], folders: [...previous.folders] }).toEqual({ files: [...files], folders: [] })
  })

  it("reads the first index layout and treats a broken one as empty", () => {
    const legacy = parseIndex(JSON.stringify({ written_at: 5, files: { "a.txt": ["h", "regular", 1, 2, 3] } }), 10)
    expect(legacy).toMatchObject({ writtenAt: 5, base: null })
    expect(legacy.files.get("a.txt")).toEqual({ hash: "h", mode: "regular", size: 1, mtimeMs: 2, ino: 3 })
    expect(parseIndex("{not json", 10).files.size).toBe(0)
  })
})
