/**
 * Writing a snapshot into the working tree (a pull, a switch, a merge; a clone writes most files as they arrive:
 * Placing.ts): what differs is written through a temp file renamed into place, what is gone removed, directories left
 * empty pruned. WorkingTree.ts scans the tree and re-exports this.
 */
import type { Objects } from "@grove/core"
import type { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as fsSync from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { CliFailure } from "../Failures.ts"
import type { IndexEntry } from "./IndexFile.ts"
import { entryOf } from "./IndexFile.ts"
import { io } from "./Io.ts"
import { tempDir } from "./Objects.ts"

type Hash = string
type BlobMode = Objects.Tree.BlobMode
type Snapshot = Objects.FileChanges.Snapshot

const sameFile = (a: { hash: Hash; mode: BlobMode } | undefined, b: { hash: Hash; mode: BlobMode } | undefined) =>
  a !== undefined && b !== undefined && a.hash === b.hash && a.mode === b.mode

/** Where the bytes of a blob can be read: a file (downloaded, kept, or elsewhere in the tree). */
export type BlobSource = (hash: Hash) => string | undefined

export interface ApplyResult {
  readonly written: number
  readonly removed: number
  /** The index after the change. */
  readonly files: ReadonlyMap<string, IndexEntry>
}

/**
 * Turns the working tree from `from` into `to`: removes what `to` lacks, writes what differs
 * (through a temp file renamed into place), prunes directories left empty. Bytes come from
 * `source`, else from a file of `from` with the same hash (copied aside before anything is
 * removed).
 */
export const applySnapshot = (
  root: string,
  from: Snapshot,
  to: Snapshot,
  source: BlobSource,
  index: ReadonlyMap<string, IndexEntry>,
  /** Sources that may be moved into place (temp downloads) when only one path needs them. */
  movable: (file: string) => boolean = () => false
): Effect.Effect<ApplyResult, CliFailure> =>
  io("cannot update the working tree", async () => {
    const tmp = tempDir(root)
    await fs.mkdir(tmp, { recursive: true })
    const files = new Map(index)
    const toWrite = [...to].filter(([file, entry]) => !sameFile(from.get(file), entry))
    const toRemove = [...from.keys()].filter((file) => !to.has(file))
    // Bytes that only the current tree has, set aside before paths are removed or overwritten.
    const aside = new Map<Hash, string>()
    const holder = new Map<Hash, string>()
    for (const [file, entry] of from) holder.set(entry.hash, file)
    for (const [, entry] of toWrite) {
      if (source(entry.hash) !== undefined || aside.has(entry.hash)) continue
      const file = holder.get(entry.hash)
      if (file === undefined) throw new Error(`no bytes for blob ${entry.hash}`)
      const copy = path.join(tmp, `aside-${randomBytes(6).toString("hex")}`)
      const absolute = path.join(root, file)
      if (from.get(file)?.mode === "symlink") await fs.writeFile(copy, await fs.readlink(absolute))
      else await fs.copyFile(absolute, copy)
      aside.set(entry.hash, copy)
    }
    const uses = new Map<Hash, number>()
    for (const [, entry] of toWrite) uses.set(entry.hash, (uses.get(entry.hash) ?? 0) + 1)
    const dirs = new Set<string>()
    for (const file of toRemove) {
      await fs.rm(path.join(root, file), { force: true, recursive: true })
      files.delete(file)
      dirs.add(path.posix.dirname(file))
    }
    // Synchronously, one file after another: each step is one small system call, and through the
    // thread pool they cost more in wake-ups than in work (a 5,000-file clone: ~150,000 futex calls).
    const madeDirs = new Set<string>()
    const prefix = path.join(tmp, `w-${randomBytes(6).toString("hex")}-`)
    let n = 0
    for (const [file, entry] of toWrite) {
      const target = path.join(root, file)
      const bytes = source(entry.hash) ?? aside.get(entry.hash)!
      const dir = path.dirname(target)
      if (!madeDirs.has(dir)) {
        fsSync.mkdirSync(dir, { recursive: true })
        madeDirs.add(dir)
      }
      const existing = fsSync.lstatSync(target, { throwIfNoEntry: false })
      if (existing === undefined && entry.mode !== "symlink" && uses.get(entry.hash) === 1 && movable(bytes)) {
        // Nothing to replace (a clone, a new file): the downloaded file itself moves into place, already complete.
        if (entry.mode === "executable") fsSync.chmodSync(bytes, 0o755)
        fsSync.renameSync(bytes, target)
        const stats = fsSync.lstatSync(target)
        files.set(file, entryOf(entry.hash, entry.mode, stats))
        continue
      }
      const temp = `${prefix}${n++}`
      if (entry.mode === "symlink") {
        fsSync.symlinkSync(fsSync.readFileSync(bytes, "utf8"), temp)
      } else {
        if (uses.get(entry.hash) === 1 && movable(bytes)) fsSync.renameSync(bytes, temp)
        else fsSync.copyFileSync(bytes, temp)
        fsSync.chmodSync(temp, entry.mode === "executable" ? 0o755 : 0o644)
      }
      // A file written where a directory used to be (or the reverse) needs the old one gone first.
      if (existing?.isDirectory() === true) {
        fsSync.rmSync(target, { recursive: true, force: true })
        madeDirs.clear() // directories under it are gone too
      }
      fsSync.renameSync(temp, target)
      const stats = fsSync.lstatSync(target)
      files.set(file, entryOf(entry.hash, entry.mode, stats))
    }
    for (const copy of aside.values()) await fs.rm(copy, { force: true })
    // Prune directories that removals left empty, deepest first, never the root.
    const sorted = [...dirs].sort((a, b) => b.length - a.length)
    for (let dir of sorted) {
      while (dir !== "." && dir !== "") {
        const removed = await fs.rmdir(path.join(root, dir)).then(() => true, () => false)
        if (!removed) break
        dir = path.posix.dirname(dir)
      }
    }
    return { written: toWrite.length, removed: toRemove.length, files }
  })
