/**
 * The directory listings the index keeps (TreeStatus.ts `folders`): an unchanged tree is walked
 * without reading a directory, and no change is ever missed because a listing came from the index:
 * a scan with the kept listings finds exactly the files a scan without an index finds.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Scope } from "effect"
import type { CliFailure } from "../Failures.ts"
import * as fs from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
import * as path from "node:path"
import { tempDir } from "../../test/support.ts"
import type { IndexEntry } from "./TreeStatus.ts"
import { Merge } from "@grove/core"
import { workingChanges } from "./LocalWork.ts"
import { initialState, newBranch } from "./State.ts"
import {
  columnsChanged,
  columnsUnchanged,
  EMPTY_INDEX,
  indexColumns,
  indexPath,
  indexSnapshot,
  readIndexSync,
  serializeIndex,
  SETTLE_MS,
  treeUnchanged,
  UNSETTLED_CTIME
} from "./TreeStatus.ts"
import { scan, writeIndex } from "./WorkingTree.ts"
import { openAt } from "./Workspace.ts"

const HOUR = 3600

/**
 * Runs `run` with `fs.readdirSync` answering `answer(read, dir)`, `read` being the real call (through
 * the builtin module, which the ESM namespace mirrors).
 */
const withReaddir = <A, E>(answer: (read: () => unknown, dir: unknown) => unknown, run: Effect.Effect<A, E>) =>
  Effect.suspend(() => {
    const cjs = createRequire(import.meta.url)("node:fs") as typeof fs
    const original = cjs.readdirSync
    return Effect.acquireUseRelease(
      Effect.sync(() => {
        cjs.readdirSync = ((...args: Parameters<typeof fs.readdirSync>) => answer(() => original(...args), args[0])) as typeof fs.readdirSync
        syncBuiltinESMExports()
      }),
      () => run,
      () =>
        Effect.sync(() => {
          cjs.readdirSync = original
          syncBuiltinESMExports()
        })
    )
  })

/** Counts `fs.readdirSync` calls while `run` runs. */
const readdirsDuring = <A, E>(run: Effect.Effect<A, E>) =>
  Effect.suspend(() => {
    let readdirs = 0
    return withReaddir((read) => (readdirs++, read()), Effect.map(run, (result) => ({ result, readdirs })))
  })

/** Waits until the file system's clock has passed every ctime under `root` by `margin` ms (ctimes cannot be set back). */
const settle = (root: string, margin = 20) =>
  Effect.gen(function*() {
    let latest = 0
    for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
      latest = Math.max(latest, fs.lstatSync(path.join(entry.parentPath, entry.name)).ctimeMs)
    }
    latest = Math.max(latest, fs.statSync(root).ctimeMs)
    while (Date.now() <= latest + margin) yield* Effect.promise(() => new Promise((done) => setTimeout(done, 5)))
  })

/**
 * A tree (a nested file, an executable, a symlink, an empty directory) and its index with folder
 * listings. `between` changes the tree after the walk and before the index is written (once the clock
 * has passed the change): only the recorded stats, not the racy rule, can tell then.
 */
const indexedWith = (between?: (root: string) => void) => Effect.gen(function*() {
  const root = yield* tempDir("folders")
  const write = (file: string, text: string, mode = 0o644) => {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
    fs.writeFileSync(path.join(root, file), text, { mode })
  }
  write("a.txt", "alpha")
  write("dir/b.txt", "beta")
  write("dir/deep/c.txt", "gamma")
  write("run.sh", "#!/bin/sh\n", 0o755)
  fs.symlinkSync("a.txt", path.join(root, "link"))
  fs.mkdirSync(path.join(root, "empty/inner"), { recursive: true })
  write(".grove/state.json", "{}")
  const past = Date.now() / 1000 - HOUR
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name)
    if (entry.isSymbolicLink()) fs.lutimesSync(file, past, past)
    else fs.utimesSync(file, past, past)
  }
  fs.utimesSync(root, past, past)
  yield* settle(root)
  // Settled: the clock has passed every change, so no directory needs the margin for coarse timestamps.
  const scanned = yield* scan(root, EMPTY_INDEX, Date.now())
  if (between !== undefined) {
    between(root)
    yield* settle(root)
  }
  yield* writeIndex(root, scanned.files, "c1", new Map(), scanned.folders)
  return root
})
const indexed = indexedWith()

/** What a scan that trusts nothing finds: path -> hash and mode. */
const truth = (root: string) => Effect.map(scan(root, EMPTY_INDEX), (s) => Object.fromEntries(s.snapshot))

describe("directory listings kept in the index", () => {
  it.effect("an untouched tree is walked without reading a directory, and the listings cover every directory", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const index = readIndexSync(root)
      expect([...index.folders.keys()].sort()).toEqual(["", "dir", "dir/deep", "empty", "empty/inner"])
      expect(yield* readdirsDuring(Effect.sync(() => treeUnchanged(root, index)))).toEqual({ result: true, readdirs: 0 })
      const { readdirs, result } = yield* readdirsDuring(scan(root, index))
      expect({ readdirs, unchanged: result.unchanged, foldersKept: result.foldersKept, hashed: result.hashed })
        .toEqual({ readdirs: 0, unchanged: true, foldersKept: true, hashed: 0 })
      // The same answer as a walk that reads every directory.
      expect(Object.fromEntries(result.snapshot)).toEqual(yield* truth(root))
    }).pipe(Effect.scoped))

  it.effect("no change is missed: adds, removals, renames, same-size edits, modes, kinds, new and removed directories", () =>
    Effect.gen(function*() {
      const at = (root: string, file: string) => path.join(root, file)
      const cases: Array<[string, (root: string) => void]> = [
        ["same-size edit", (root) => fs.writeFileSync(at(root, "dir/deep/c.txt"), "GAMMA")],
        ["same-size edit, mtime put back", (root) => {
          const before = fs.statSync(at(root, "dir/b.txt"))
          fs.writeFileSync(at(root, "dir/b.txt"), "BETA")
          fs.utimesSync(at(root, "dir/b.txt"), before.atime, before.mtime)
        }],
        ["added in a listed directory", (root) => fs.writeFileSync(at(root, "dir/new.txt"), "new")],
        ["added in an empty directory", (root) => fs.writeFileSync(at(root, "empty/inner/new.txt"), "new")],
        ["added in a new directory", (root) => {
          fs.mkdirSync(at(root, "dir/deep/fresh"))
          fs.writeFileSync(at(root, "dir/deep/fresh/x.txt"), "x")
        }],
        ["removed", (root) => fs.rmSync(at(root, "dir/deep/c.txt"))],
        ["renamed in its directory", (root) => fs.renameSync(at(root, "dir/b.txt"), at(root, "dir/b2.txt"))],
        ["moved to another directory", (root) => fs.renameSync(at(root, "dir/deep/c.txt"), at(root, "empty/c.txt"))],
        ["directory renamed", (root) => fs.renameSync(at(root, "dir/deep"), at(root, "dir/deeper"))],
        ["directory removed", (root) => fs.rmSync(at(root, "dir"), { recursive: true })],
        ["chmod +x", (root) => fs.chmodSync(at(root, "dir/b.txt"), 0o755)],
        ["chmod -x", (root) => fs.chmodSync(at(root, "run.sh"), 0o644)],
        ["symlink -> file", (root) => {
          fs.rmSync(at(root, "link"))
          fs.writeFileSync(at(root, "link"), "a.txt")
        }],
        ["file -> directory", (root) => {
          fs.rmSync(at(root, "a.txt"))
          fs.mkdirSync(at(root, "a.txt"))
          fs.writeFileSync(at(root, "a.txt/inside"), "in")
        }]
      ]
      const variants = cases.flatMap(([label, change]): Array<[string, Effect.Effect<string, CliFailure, Scope.Scope>]> => [
        [`${label}, after the index`, Effect.tap(indexed, (root) => Effect.sync(() => change(root)))],
        [`${label}, between the walk and the index`, indexedWith(change)]
      ])
      for (const [label, make] of variants) {
        const root = yield* make
        const index = readIndexSync(root)
        const scanned = yield* scan(root, index)
        expect({ label, unchanged: treeUnchanged(root, index), scanUnchanged: scanned.unchanged })
          .toEqual({ label, unchanged: false, scanUnchanged: false })
        expect({ label, snapshot: Object.fromEntries(scanned.snapshot) }).toEqual({ label, snapshot: yield* truth(root) })
      }
    }).pipe(Effect.scoped))

  it.effect("an unchanged tree is told from the index's columns; any recorded field that differs is a change", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const index = readIndexSync(root)
      expect(columnsUnchanged(root, index, true)?.same).toBe(true)
      expect(columnsUnchanged(root, { ...index }, true)).toBeUndefined() // a copy may hold other entries
      // The index file as written, with one field of dir/b.txt's entry not as the file is now.
      const rewrite = (edit: (entry: IndexEntry) => IndexEntry) => {
        const files = new Map(index.files)
        files.set("dir/b.txt", edit(files.get("dir/b.txt")!))
        fs.writeFileSync(indexPath(root), serializeIndex(files, index.base, index.dirs, index.writtenAt, index.folders))
      }
      const edits: Array<[string, (entry: IndexEntry) => IndexEntry]> = [
        ["size", (e) => ({ ...e, size: e.size + 1 })],
        ["mtime", (e) => ({ ...e, mtimeMs: e.mtimeMs - 1 })],
        ["inode", (e) => ({ ...e, ino: e.ino + 1 })],
        ["ctime", (e) => ({ ...e, ctimeMs: e.ctimeMs! - 1 })],
        ["mode", (e) => ({ ...e, mode: "executable" })],
        ["kind", (e) => ({ ...e, mode: "symlink" })]
      ]
      for (const [label, edit] of edits) {
        rewrite(edit)
        const edited = readIndexSync(root)
        expect({ label, fast: columnsUnchanged(root, edited, true)?.same, tree: treeUnchanged(root, edited) })
          .toEqual({ label, fast: false, tree: false })
        expect({ label, scan: (yield* scan(root, edited)).unchanged }).toEqual({ label, scan: false })
      }
      // An entry without a ctime (an older index): unchanged, but a scan makes its entry again.
      rewrite((e) => ({ hash: e.hash, mode: e.mode, size: e.size, mtimeMs: e.mtimeMs, ino: e.ino }))
      const older = readIndexSync(root)
      expect(columnsUnchanged(root, older, false)?.same).toBe(true)
      expect(columnsUnchanged(root, older, true)).toBeUndefined()
      expect(treeUnchanged(root, older)).toBe(true)
      const scanned = yield* scan(root, older)
      expect({ unchanged: scanned.unchanged, ctime: scanned.files.get("dir/b.txt")?.ctimeMs })
        .toEqual({ unchanged: true, ctime: fs.lstatSync(path.join(root, "dir/b.txt")).ctimeMs })
    }).pipe(Effect.scoped))

  it.effect("the check of an unchanged tree makes none of the index's maps: entries, directories, tree hashes", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const index = readIndexSync(root)
      const made: Array<string> = []
      for (const key of ["files", "folders", "dirs"] as const) {
        const lazy = Object.getOwnPropertyDescriptor(index, key)!
        Object.defineProperty(index, key, { ...lazy, get: () => (made.push(key), lazy.get!.call(index)) })
      }
      expect(columnsChanged(root, index, true)?.changed).toEqual([])
      expect(made).toEqual([])
      // Asked for, they are the index file's.
      expect([...index.folders.keys()].sort()).toEqual(["", "dir", "dir/deep", "empty", "empty/inner"])
      expect(columnsChanged(root, index, true)?.folders).toBe(index.folders)
    }).pipe(Effect.scoped))

  it.effect("a few changed files are told from the columns: only they are hashed, and status compares only them", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const at = (file: string) => path.join(root, file)
      fs.writeFileSync(at("dir/deep/c.txt"), "GAMMA") // same size
      fs.chmodSync(at("run.sh"), 0o644)
      fs.utimesSync(at("a.txt"), new Date(), new Date()) // touched: same bytes
      const index = readIndexSync(root)
      // The index's entries (an object per file, made from the columns when first asked for) are never made.
      let entriesMade = 0
      const files = Object.getOwnPropertyDescriptor(index, "files")!
      Object.defineProperty(index, "files", { ...files, get: () => (entriesMade++, files.get!.call(index)) })
      const { readdirs, result } = yield* readdirsDuring(scan(root, index))
      const edits = [...(result.edits ?? [])].sort((a, b) => a.path.localeCompare(b.path))
      expect({
        readdirs,
        hashed: result.hashed,
        unchanged: result.unchanged,
        edits: edits.map((e) => ({ path: e.path, sameBytes: e.before.hash === e.after.hash, mode: [e.before.mode, e.after.mode] }))
      }).toEqual({
        readdirs: 0,
        hashed: 3,
        unchanged: false,
        edits: [
          { path: "a.txt", sameBytes: true, mode: ["regular", "regular"] },
          { path: "dir/deep/c.txt", sameBytes: false, mode: ["regular", "regular"] },
          { path: "run.sh", sameBytes: true, mode: ["executable", "regular"] }
        ]
      })
      const workspace = openAt(root, { remote: "http://127.0.0.1:9" })
      const work = yield* workingChanges(workspace, initialState("tester", newBranch("tester-abcdef", { head: "c1", remote_head: "c1" })))
      expect(entriesMade).toBe(0)
      // The same as the head's files against the tree's, every file compared.
      expect(work.changes).toEqual(Merge.TreeDiff.diffSnapshots(indexSnapshot(index), new Map(Object.entries(yield* truth(root)))))
      expect(work.changes.map((c) => c.path)).toEqual(["dir/deep/c.txt", "run.sh"])
      expect(Object.fromEntries(result.snapshot)).toEqual(yield* truth(root))
    }).pipe(Effect.scoped))

  it.effect("a directory changed no earlier than the index was written is read again (racily clean)", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const index = readIndexSync(root)
      const dir = fs.statSync(path.join(root, "dir"))
      // The listing is as recorded, but the index is no older than the directory: it is not trusted.
      const racy = { ...index, writtenAt: Math.max(dir.mtimeMs, dir.ctimeMs) }
      const { readdirs, result } = yield* readdirsDuring(scan(root, racy))
      expect(readdirs).toBeGreaterThanOrEqual(1)
      expect(result.foldersKept).toBe(false)
      expect((yield* readdirsDuring(Effect.sync(() => treeUnchanged(root, racy)))).readdirs)
        .toBeGreaterThanOrEqual(1)
    }).pipe(Effect.scoped))

  it.effect("a name added in the tick the walk read its directory is not missed: a fresh directory is read again", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("folders-tick")
      // A margin start taken before the directory is made (less a coarse clock tick): the directory is fresh
      // for the walk however long a loaded machine stalls before it (the default is now - 2 s).
      const settledBefore = Date.now() - 50
      fs.mkdirSync(path.join(root, "d"))
      fs.writeFileSync(path.join(root, "d/a.txt"), "alpha")
      fs.writeFileSync(path.join(root, "d/b.txt"), "beta")
      // The walk reads d/ before b.txt lands, and b.txt lands in the same timestamp tick: d/'s stat
      // is then the one the walk took. Hiding b.txt from that read is the same (the default margin).
      const dir = path.join(root, "d")
      const scanned = yield* withReaddir(
        (read, at) => at === dir ? (read() as Array<fs.Dirent>).filter((entry) => entry.name !== "b.txt") : read(),
        scan(root, EMPTY_INDEX, settledBefore)
      )
      expect([...scanned.files.keys()]).toEqual(["d/a.txt"])
      expect(scanned.folders.get("d")?.ctimeMs).toBe(UNSETTLED_CTIME)
      yield* settle(root) // the index is written in a later tick
      yield* writeIndex(root, scanned.files, null, new Map(), scanned.folders)
      const index = readIndexSync(root)
      expect(treeUnchanged(root, index)).toBe(false)
      const again = yield* scan(root, index)
      expect([...again.files.keys()].sort()).toEqual(["d/a.txt", "d/b.txt"])
      expect(again.unchanged).toBe(false)
    }).pipe(Effect.scoped))

  it.effect("a directory last changed before the margin is recorded as it is", () =>
    Effect.gen(function*() {
      const madeAfter = Date.now() - 50
      const root = yield* indexed
      const index = readIndexSync(root)
      // The same tree walked as if two margins later: every directory is settled and kept.
      const later = Date.now() + 1_000_000
      const scanned = yield* scan(root, { ...index, folders: new Map() }, later)
      expect([...scanned.folders.values()].filter((f) => f.ctimeMs === UNSETTLED_CTIME)).toEqual([])
      // Walked with a margin that starts before the tree was made, its directories are recorded unsettled.
      const fresh = yield* scan(root, { ...index, folders: new Map() }, madeAfter)
      expect(fresh.folders.get("dir")?.ctimeMs).toBe(UNSETTLED_CTIME)
    }).pipe(Effect.scoped))

  it.effect("a directory recorded unsettled is recorded again by a status with an edit once settled: the quick check applies again", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const head = readIndexSync(root)
      // As a push right after a file was added to dir/ leaves it: recorded unsettled, the head's entries.
      const folders = new Map(head.folders)
      folders.set("dir", { ...folders.get("dir")!, ctimeMs: UNSETTLED_CTIME })
      yield* writeIndex(root, head.files, "c1", new Map(), folders)
      fs.writeFileSync(path.join(root, "dir/b.txt"), "BETA, edited")
      expect(columnsChanged(root, readIndexSync(root), true)).toBeUndefined() // not told from the columns: a walk
      yield* settle(root, SETTLE_MS) // the status comes later: every directory is settled for its walk
      const workspace = openAt(root, { remote: "http://127.0.0.1:9" })
      const state = initialState("tester", newBranch("tester-abcdef", { head: "c1", remote_head: "c1" }))
      const first = yield* workingChanges(workspace, state)
      expect(first.changes.map((c) => c.path)).toEqual(["dir/b.txt"])
      const index = readIndexSync(root)
      expect(index.folders.get("dir")?.ctimeMs).toBe(fs.statSync(path.join(root, "dir")).ctimeMs)
      // The head's entries, not the edited file's: the edit is still a change, and the next check is told from the columns.
      expect({ base: index.base, hash: index.files.get("dir/b.txt")?.hash }).toEqual({ base: "c1", hash: head.files.get("dir/b.txt")?.hash })
      const found = columnsChanged(root, index, true)
      expect(found?.changed.map((i) => indexColumns(index)!.paths[i])).toEqual(["dir/b.txt"])
      const second = yield* readdirsDuring(workingChanges(workspace, state))
      expect({ readdirs: second.readdirs, changes: second.result.changes }).toEqual({ readdirs: 0, changes: first.changes })
      // Only a walk that found the index's names records directories with the index's entries (a listing is its names).
      const names = (change: () => void) => Effect.map(Effect.sync(change).pipe(Effect.andThen(scan(root, index))), (s) => s.sameNames)
      expect(yield* names(() => fs.writeFileSync(path.join(root, "dir/new.txt"), "new"))).toBe(false)
      expect(yield* names(() => fs.renameSync(path.join(root, "dir/new.txt"), path.join(root, "a.txt")))).toBe(true) // a.txt replaced
      expect(yield* names(() => fs.renameSync(path.join(root, "a.txt"), path.join(root, "dir/a.txt")))).toBe(false)
    }).pipe(Effect.scoped))

  it.effect("recording directories again never trusts an entry the old index could not (a racily clean one)", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const head = readIndexSync(root)
      const file = path.join(root, "dir/deep/c.txt")
      fs.writeFileSync(file, "GAMMA") // same size, in the tick the index was written: its entry holds the new stat
      const stats = fs.lstatSync(file)
      const files = new Map(head.files)
      files.set("dir/deep/c.txt", { ...head.files.get("dir/deep/c.txt")!, mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs, ino: stats.ino })
      const folders = new Map(head.folders)
      folders.set("dir", { ...folders.get("dir")!, ctimeMs: UNSETTLED_CTIME })
      fs.writeFileSync(indexPath(root), serializeIndex(files, "c1", new Map(), stats.mtimeMs, folders))
      yield* settle(root, SETTLE_MS)
      const workspace = openAt(root, { remote: "http://127.0.0.1:9" })
      const state = initialState("tester", newBranch("tester-abcdef", { head: "c1", remote_head: "c1" }))
      expect((yield* workingChanges(workspace, state)).changes.map((c) => c.path)).toEqual(["dir/deep/c.txt"])
      expect(readIndexSync(root).folders.get("dir")?.ctimeMs).not.toBe(UNSETTLED_CTIME) // written again
      expect((yield* workingChanges(workspace, state)).changes.map((c) => c.path)).toEqual(["dir/deep/c.txt"])
    }).pipe(Effect.scoped))

  it.effect("an index without listings (written after a clone or pull) reads every directory", () =>
    Effect.gen(function*() {
      const root = yield* indexed
      const index = { ...readIndexSync(root), folders: new Map() }
      const { readdirs, result } = yield* readdirsDuring(scan(root, index))
      expect({ readdirs, unchanged: result.unchanged, foldersKept: result.foldersKept }).toEqual({ readdirs: 5, unchanged: true, foldersKept: false })
    }).pipe(Effect.scoped))
})
