/**
 * A directory holding its own `.grove` (another checkout, or a clone that did not finish) is not part of the checkout
 * around it (git's rule for a nested repository): the full walk, the walk from the index's listings and the quick
 * check (the stat pass of the no-op push and quick status) all leave its files out, and take them again once its
 * `.grove` is gone.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir } from "../../test/support.ts"
import {
  columnsChanged,
  EMPTY_INDEX,
  indexPath,
  parseIndexBytes,
  readIndexSync,
  serializeIndex,
  treeUnchanged,
  walk
} from "./TreeStatus.ts"
import { scan, writeIndex } from "./WorkingTree.ts"

/** Waits until the clock has passed every ctime under `root` (so the index written next trusts every stat). */
const settle = (root: string) =>
  Effect.gen(function*() {
    let latest = fs.statSync(root).ctimeMs
    for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
      latest = Math.max(latest, fs.lstatSync(path.join(entry.parentPath, entry.name)).ctimeMs)
    }
    while (Date.now() <= latest + 20) yield* Effect.promise(() => new Promise((done) => setTimeout(done, 5)))
  })

const write = (root: string, file: string, text: string) => {
  fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
  fs.writeFileSync(path.join(root, file), text)
}

/** Scans with `index`, writes the index of what it found (as status does), and gives the names found. */
const scanAndRecord = (root: string, index = readIndexSync(root)) =>
  Effect.gen(function*() {
    const scanned = yield* scan(root, index, Date.now())
    yield* writeIndex(root, scanned.files, null, new Map(), scanned.folders)
    return [...scanned.files.keys()].sort()
  })

/** What the quick paths see: the stat pass (NoopPush, quick status) and the walk-less check. */
const quick = (root: string) => {
  const index = readIndexSync(root)
  return { stat: columnsChanged(root, index, true)?.changed.length, unchanged: treeUnchanged(root, index) }
}

describe("a checkout nested in another", () => {
  it.effect("its files are never the outer checkout's, in every walk and the quick check", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("nested")
      write(root, ".grove/config.json", "{}")
      write(root, "a.txt", "a")
      write(root, "sub/x.txt", "x")
      yield* settle(root)
      expect(yield* scanAndRecord(root, EMPTY_INDEX)).toEqual(["a.txt", "sub/x.txt"])
      // A clone killed before it finished (no config.json), then a finished one: neither's files are the outer's.
      write(root, "dest/.grove/objects/o", "")
      write(root, "dest/src/b.txt", "b")
      write(root, "done/.grove/config.json", "{}")
      write(root, "done/c.txt", "c")
      yield* settle(root)
      expect(walk(root).map((f) => f.path).sort()).toEqual(["a.txt", "sub/x.txt"])
      expect(yield* scanAndRecord(root)).toEqual(["a.txt", "sub/x.txt"])
      yield* settle(root)
      // Recorded with no names: what happens inside it leaves the outer checkout unchanged, quick check included.
      write(root, "dest/src/new.txt", "n")
      expect(quick(root)).toEqual({ stat: 0, unchanged: true })
      // A name added in its root changes the directory recorded: the quick check leaves it to the walk, which agrees.
      write(root, "dest/top.txt", "t")
      expect(quick(root)).toEqual({ stat: undefined, unchanged: true })
      expect(yield* scanAndRecord(root)).toEqual(["a.txt", "sub/x.txt"])
      // grove init in a directory it tracks (or an empty .grove made there): that directory stays this checkout's, as git
      // keeps tracking files under a nested repository — its tracked files never turn into deletions here.
      yield* settle(root)
      write(root, "sub/.grove/config.json", "{}")
      expect(quick(root).unchanged).toBe(true)
      expect(yield* scanAndRecord(root)).toEqual(["a.txt", "sub/x.txt"])
      write(root, "sub/more.txt", "m")
      expect(yield* scanAndRecord(root)).toEqual(["a.txt", "sub/more.txt", "sub/x.txt"])
      // Its .grove removed: its files are the outer checkout's again, found by the quick check and every walk.
      yield* settle(root)
      fs.rmSync(path.join(root, "dest/.grove"), { recursive: true })
      expect(quick(root)).toEqual({ stat: undefined, unchanged: false })
      const all = ["a.txt", "dest/src/b.txt", "dest/src/new.txt", "dest/top.txt", "sub/more.txt", "sub/x.txt"]
      expect(yield* scanAndRecord(root)).toEqual(all)
      expect(walk(root, readIndexSync(root)).map((f) => f.path).sort()).toEqual(all)
      // A file named .grove is content, and no checkout.
      write(root, "f/.grove", "not a directory")
      expect(walk(root).map((f) => f.path)).toContain("f/.grove")
    }).pipe(Effect.scoped))

  it.effect("a .grove of repository content below the root is no checkout: its folder stays this checkout's", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("nested")
      write(root, ".grove/config.json", "{}")
      for (const file of ["a.txt", "sub/a.txt", "kit/b.txt", "own/c.txt"]) write(root, file, file)
      yield* settle(root)
      const scanned = yield* scan(root, EMPTY_INDEX, Date.now())
      // As a clone of a repository holding content under nested `.grove` folders leaves it: these tracked too. kit's
      // looks like grove's own (a config.json), but the index tracks it; own's (untracked) holds other names.
      write(root, "sub/.grove/notes.txt", "n")
      write(root, "kit/.grove/config.json", "{}")
      write(root, "own/.grove/notes.txt", "mine")
      const entry = scanned.files.get("a.txt")!
      const tracked = new Map([
        ["sub/.grove/notes.txt", { ...entry, hash: "1".repeat(64) }],
        ["kit/.grove/config.json", { ...entry, hash: "2".repeat(64) }]
      ])
      yield* writeIndex(root, new Map([...scanned.files, ...tracked]), null)
      yield* settle(root)
      const all = ["a.txt", "kit/b.txt", "own/c.txt", "sub/a.txt"]
      const names = (files: ReadonlyMap<string, unknown>) => [...files.keys()].filter((f) => !tracked.has(f)).sort()
      const record = Effect.gen(function*() {
        const again = yield* scan(root, readIndexSync(root), Date.now())
        yield* writeIndex(root, new Map([...again.files, ...tracked]), null, new Map(), again.folders)
        return names(again.files)
      })
      // Status (a scan with the index) lists none of sub/, kit/ or own/ as removed, from a full walk and from listings.
      expect(yield* record).toEqual(all)
      yield* settle(root)
      expect(yield* record).toEqual(all)
      expect(walk(root, readIndexSync(root)).map((f) => f.path).sort()).toEqual(all)
      // Those folders are not trusted as recorded (what their `.grove` holds may change unseen): the quick check hands over.
      expect(quick(root).stat).toBeUndefined()
      // grove init in own/ (its .grove gets a config.json; own/'s own stat unchanged): own/c.txt is in the index, so own/
      // stays this checkout's (a folder it tracks files in never becomes another checkout's: C4's F1).
      yield* settle(root)
      write(root, "own/.grove/config.json", "{}")
      expect(yield* record).toEqual(all)
      // A new folder whose files this checkout never recorded, with a grove init in it: another checkout's.
      write(root, "fresh/.grove/config.json", "{}")
      write(root, "fresh/d.txt", "d")
      expect(yield* record).toEqual(all)
    }).pipe(Effect.scoped))

  it.effect("an index written before this rule (its directories as `folders`) has its directories read again", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("nested")
      write(root, ".grove/config.json", "{}")
      write(root, "a.txt", "a")
      write(root, "dest/.grove/objects/o", "")
      write(root, "dest/src/b.txt", "b")
      yield* settle(root)
      // As a client before it walked: the nested files listed, every directory recorded as it is now.
      const scanned = yield* scan(root, EMPTY_INDEX, Date.now())
      const folders = new Map(scanned.folders)
      const entry = scanned.files.get("a.txt")!
      const files = new Map([...scanned.files, ["dest/src/b.txt", { ...entry, hash: "b".repeat(64) }]])
      for (const dir of ["dest", "dest/src"]) {
        const stats = fs.statSync(path.join(root, dir))
        folders.set(dir, { mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs, ino: stats.ino })
      }
      yield* settle(root)
      const bytes = serializeIndex(files, null, new Map(), Date.now(), folders)
      expect(parseIndexBytes(bytes, Date.now()).folders.size).toBe(folders.size)
      fs.writeFileSync(indexPath(root), oldLayout(bytes))
      expect(readIndexSync(root).folders.size).toBe(0)
      expect(quick(root).stat).toBeUndefined()
      // Files it lists under a nested checkout stay this checkout's (tracked: as before this rule, never deletions).
      expect(yield* scanAndRecord(root)).toEqual(["a.txt", "dest/src/b.txt"])
    }).pipe(Effect.scoped))
})

/** `bytes` (serializeIndex) with the directories' rows named `folders`, as before: the head and its padding redone. */
const oldLayout = (bytes: Buffer): Buffer => {
  const newline = bytes.indexOf(10)
  const head = JSON.parse(bytes.toString("utf8", 0, newline)) as Record<string, unknown>
  const { walked, ...rest } = head
  const oldHead = Buffer.from(`${JSON.stringify({ ...rest, folders: walked })}\n`)
  const n = Number(head["files"]), pathBytes = Number(head["path_bytes"])
  const pad = (at: number) => (8 - (at % 8)) % 8
  const namesEnd = newline + 1 + pathBytes + n
  const body = bytes.subarray(newline + 1, namesEnd)
  const tail = bytes.subarray(namesEnd + pad(namesEnd))
  const end = oldHead.length + pathBytes + n
  return Buffer.concat([oldHead, body, Buffer.alloc(pad(end)), tail])
}
