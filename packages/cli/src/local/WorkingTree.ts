/**
 * The working tree: scanning it into a snapshot (path -> blob hash and mode)
 * with an index (`.grove/index.json`) so unchanged files are not hashed again;
 * writing a snapshot back into it is TreeWrite.ts (re-exported). `.grove/` and
 * `.git/` are never part of the tree. An executable bit gives mode `executable`; a symlink is a blob of
 * mode `symlink` whose bytes are the link target.
 */
import { Objects } from "@grove/core"
import { Effect } from "effect"
import type { Stats } from "node:fs"
import * as fsSync from "node:fs"
import * as fs from "node:fs/promises"
import { failure } from "../Failures.ts"
import type { CliFailure } from "../Failures.ts"
import { hashFile } from "./Hashing.ts"
import { errorMessage, io, writeAtomic, writeAtomicStat } from "./Io.ts"
import { tokenBeforeScan, tokenForWrittenIndex } from "../watch/WatchClient.ts"
import type { ColumnsChanged, FolderStat, IndexEntry, WorkIndex } from "./TreeStatus.ts"
import {
  changedFiles,
  columnsChanged,
  entryOf,
  forgetIndexRead,
  indexPath,
  indexSnapshot,
  modeOf,
  NO_FOLDERS,
  readIndexSync,
  reservedPaths,
  serializeIndex,
  snapshotOf,
  statMatches,
  takePass,
  UNSETTLED_CTIME,
  walk
} from "./TreeStatus.ts"

export type { IndexEntry, WorkIndex } from "./TreeStatus.ts"
export { indexPath } from "./TreeStatus.ts"
export type { ApplyResult, BlobSource } from "./TreeWrite.ts"
export { applySnapshot } from "./TreeWrite.ts"

type Hash = string
type BlobMode = Objects.Tree.BlobMode
export type Snapshot = Objects.FileChanges.Snapshot

export const readIndex = (root: string): Effect.Effect<WorkIndex, CliFailure> =>
  Effect.try({
    try: () => readIndexSync(root),
    catch: (error) => failure(`cannot read the working-tree index: ${errorMessage(error)}`, "local_io")
  })

const NO_DIRS: ReadonlyMap<string, Hash> = new Map()

const VALID = { ok: true as const }

/**
 * A file new to the index can be committed: a valid path, holding no `.grove` (Tree.dotGroveIn: a file named so, or
 * one under `D/.GROVE/` on a case-sensitive file system; the walk skips a `.grove` folder) that servers refuse at
 * any depth, as git refuses `.git`.
 */
const checkNewPath = (file: string): ReturnType<typeof Objects.Path.checkPath> => {
  const reserved = Objects.Tree.dotGroveIn(file)
  if (reserved === undefined) return Objects.Path.checkPath(file)
  return { ok: false, reason: takenText(reserved) }
}

const takenText = (at: string) => `'${at}' is taken for '.grove', where grove keeps a checkout's own files`

/**
 * Why a tracked path a checkout takes for `.grove` (`reservedPaths`: an older client took it below the root) cannot be
 * committed while its file is there: servers refuse such a tree, and the walk skips a `.grove` folder, so it would
 * otherwise read as deleted and a push delete it. Moved or removed, it reads as deleted.
 */
const trackedTakenText = (file: string, at: string) =>
  `tracked, but ${takenText(at)}: ${at === file ? "rename it" : `move it out of '${at}'`}`

/**
 * Writes the index. `base` is the commit whose files are exactly `files` (hash and mode), or null
 * when the caller does not know that: only a known base lets a later command skip reading that
 * commit's trees. `dirs` are that commit's directory tree hashes, when known.
 */
export const writeIndex = (
  root: string,
  files: ReadonlyMap<string, IndexEntry>,
  base: Hash | null,
  dirs: ReadonlyMap<string, Hash> = NO_DIRS,
  /** The directories of the walk that found exactly `files` (`ScanResult.folders`); none otherwise. */
  folders: ReadonlyMap<string, FolderStat> = NO_FOLDERS,
  /** That scan's `watchToken`: kept for the new index file, so the next quick command need not stat every file. */
  watchToken?: string | undefined
): Effect.Effect<void, CliFailure> =>
  io("cannot write the working-tree index", async () => {
    forgetIndexRead()
    const writtenAt = Date.now()
    const text = serializeIndex(files, base, dirs, writtenAt, folders)
    if (watchToken === undefined) return writeAtomic(indexPath(root), text)
    const stats = await writeAtomicStat(indexPath(root), text)
    await tokenForWrittenIndex(root, watchToken, stats, writtenAt, files, folders)
  })

/** Runs `task` over `items`, at most `limit` at a time. */
export const mapLimit = async <A, B>(items: ReadonlyArray<A>, limit: number, task: (item: A) => Promise<B>): Promise<Array<B>> => {
  const results: Array<B> = []
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await task(items[i]!)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

export interface ScanResult {
  readonly snapshot: Snapshot
  /** The index to keep: every file with its hash and stat. */
  readonly files: ReadonlyMap<string, IndexEntry>
  /** Files that had to be hashed (new or changed since the index). */
  readonly hashed: number
  /**
   * Paths that cannot be stored (invalid names), with the reason; a tracked one (a `.grove` path an older client took)
   * keeps its index entry in `files` and the snapshot, so it never reads as deleted while its file is there.
   */
  readonly invalid: ReadonlyArray<{ readonly path: string; readonly reason: string }>
  /** The tree holds exactly the index's files with the same hashes and modes (its snapshot is the index's). */
  readonly unchanged: boolean
  /** The stat of every directory walked, for the index written with `files` (none when paths were invalid). */
  readonly folders: ReadonlyMap<string, FolderStat>
  /** The checkout's watcher's token taken before the scan began (watch/WatchClient.ts), when a watcher answered. */
  readonly watchToken: string | undefined
  /** Every directory was listed from the index: writing it again would not spare the next walk a read. */
  readonly foldersKept: boolean
  /** The tree holds exactly the index's names: only files' bytes, modes or stats differ (`folders` then list them). */
  readonly sameNames: boolean
  /**
   * When the scan knows it: each file whose entry is not the index's, with both entries (in the index's order); the
   * tree then holds exactly the index's names and every other file is the index's entry. Undefined after a walk.
   */
  readonly edits?: ReadonlyArray<Edit> | undefined
}

/** A file of the index found changed: its entry in the index and its entry now. */
export interface Edit {
  readonly path: string
  readonly before: IndexEntry
  readonly after: IndexEntry
}

const sameFolders = (index: WorkIndex, folders: ReadonlyMap<string, FolderStat>): boolean => {
  if (folders.size !== index.folders.size) return false
  for (const [dir, f] of folders) {
    const known = index.folders.get(dir)
    if (known?.mtimeMs !== f.mtimeMs || known.ctimeMs !== f.ctimeMs || known.ino !== f.ino) return false
    if (f.mtimeMs >= index.writtenAt || f.ctimeMs >= index.writtenAt) return false // racy: read again next time
  }
  return true
}

/**
 * Every file of the working tree; files whose stat matches the index keep their hash, and directories
 * whose stat matches are listed from it (see TreeStatus.ts).
 */
export const scan = (
  root: string,
  index: WorkIndex,
  /** Directories changed at or after this are recorded unsettled (TreeStatus.ts `SETTLE_MS`); tests set it. */
  settledBefore?: number
): Effect.Effect<ScanResult, CliFailure> =>
  io("cannot read the working tree", async () => {
    // Before any stat: the index written from this scan is then good under this token (writeIndex), unless a file
    // has another hard link (it can change through that one with no event in its directory).
    const token = await tokenBeforeScan(root)
    const kept = takePass(root, index)
    // Most often nothing changed, or only a few files: told from the index's columns, without an entry per file.
    const fast = (token === undefined ? kept : undefined) ?? columnsChanged(root, index, true)
    if (fast !== undefined && fast.changed.length === 0) {
      let snapshot: Snapshot | undefined
      return {
        get snapshot() {
          return snapshot ??= indexSnapshot(index)
        },
        get files() {
          return index.files
        },
        hashed: 0,
        invalid: [],
        unchanged: true,
        folders: fast.folders,
        foldersKept: sameFolders(index, fast.folders),
        sameNames: true,
        watchToken: fast.linked ? undefined : token
      }
    }
    // Some changed, no name added or removed: only those are hashed, and the rest is the index's.
    const edits = fast === undefined ? undefined : await hashEdits(root, index, fast)
    if (fast !== undefined && edits !== undefined) {
      let files: ReadonlyMap<string, IndexEntry> | undefined
      const filesOf = () => files ??= withEdits(index.files, edits)
      let snapshot: Snapshot | undefined
      return {
        get snapshot() {
          return snapshot ??= snapshotOf(filesOf())
        },
        get files() {
          return filesOf()
        },
        hashed: edits.length,
        invalid: [],
        unchanged: false, // as after a walk: the stats of the files hashed are new
        folders: fast.folders,
        foldersKept: sameFolders(index, fast.folders),
        sameNames: true,
        watchToken: fast.linked ? undefined : token,
        edits
      }
    }
    const seen = new Map<string, FolderStat>()
    const found = walk(root, index, seen, settledBefore)
    const reserved = reservedPaths(index)
    const keptReserved: Array<readonly [string, IndexEntry]> = [] // tracked `.grove` paths still there, kept as indexed
    const entries: Array<IndexEntry | undefined> = [] // by position in `found`; a hole for a path left out
    const invalid: Array<{ path: string; reason: string }> = []
    const changed: Array<{ i: number; absolute: string; symlink: boolean; stats: Stats; mode: BlobMode }> = []
    let sameModes = true
    let linked = false
    let reused = 0
    let knownFound = 0 // files found (and still there) that the index names
    // Stat synchronously (cheap, see walk); only new or changed files are read and hashed, concurrently.
    for (let i = 0; i < found.length; i++) {
      const { path: file } = found[i]!
      const known = index.files.get(file)
      // A path in the index was valid when it got there, but for a `.grove` below the root an older client took.
      const at = known === undefined || reserved.size === 0 ? undefined : reserved.get(file)
      const check = known === undefined ? checkNewPath(file) : at === undefined ? VALID : { ok: false as const, reason: trackedTakenText(file, at) }
      if (!check.ok) {
        invalid.push({ path: file, reason: check.reason })
        if (known !== undefined) keptReserved.push([file, known])
        continue
      }
      const absolute = `${root}/${file}`
      const stats = fsSync.lstatSync(absolute, { throwIfNoEntry: false })
      if (stats === undefined) continue // removed while scanning
      if (known !== undefined) knownFound++
      if (stats.nlink > 1) linked = true
      // The kind as it is now (a listing kept in the index says what it was).
      const symlink = stats.isSymbolicLink()
      const mode = modeOf(stats, symlink)
      if (statMatches(known, stats, symlink, index.writtenAt)) {
        if (known.mode !== mode) sameModes = false
        // Same stat: the same entry (an entry from before ctime was kept gets it now).
        if (known.mode === mode && known.ctimeMs !== undefined) {
          entries[i] = known
          reused++
        } else entries[i] = { ...known, mode, ctimeMs: stats.ctimeMs }
      } else changed.push({ i, absolute, symlink, stats, mode })
    }
    await mapLimit(changed, 16, async ({ absolute, i, mode, stats, symlink }) => {
      const hash = symlink ? Objects.Blake3.hash(await fs.readlink(absolute)) : await hashFile(absolute, stats.size)
      entries[i] = entryOf(hash, mode, stats)
    })
    // The walk skips a `.grove` folder: a tracked path under one is looked at on its own.
    for (const [file, at] of reserved) {
      if (keptReserved.some(([kept]) => kept === file)) continue
      const stats = fsSync.lstatSync(`${root}/${file}`, { throwIfNoEntry: false })
      if (stats === undefined || !(stats.isFile() || stats.isSymbolicLink())) continue // gone: reads as deleted
      invalid.push({ path: file, reason: trackedTakenText(file, at) })
      keptReserved.push([file, index.files.get(file)!])
    }
    // Every file found is the index's entry, object for object: the index's map is the scan's (nothing is copied).
    const files: ReadonlyMap<string, IndexEntry> = reused === found.length && reused === index.files.size ? index.files : new Map([
      ...found.flatMap(({ path: file }, i) => entries[i] === undefined ? [] : [[file, entries[i]] as const]),
      ...keptReserved
    ])
    const unchanged = changed.length === 0 && invalid.length === 0 && sameModes && files.size === index.files.size
    const folders = invalid.length === 0 ? seen : NO_FOLDERS
    let snapshot: Snapshot | undefined
    return {
      // Built when asked: a command that finds the tree unchanged never needs it.
      get snapshot() {
        return snapshot ??= snapshotOf(files)
      },
      files,
      hashed: changed.length,
      invalid,
      unchanged,
      folders,
      foldersKept: sameFolders(index, folders),
      sameNames: invalid.length === 0 && knownFound === found.length && knownFound === index.files.size,
      watchToken: linked ? undefined : token
    }
  })

/**
 * After a walk that found exactly the index's names, the index again with its own entries (the head's, when its base is
 * the head) and the directories as this walk recorded them, when one not as recorded before (e.g. recorded unsettled:
 * changed within SETTLE_MS of the push that added a file to it) is settled now. Otherwise, while a file is edited, no
 * command writes the index and every status walks the tree (and takes the full command, not the quick one) until the
 * next commit. An entry the old index could not trust (changed in its write's clock tick) is written so that it
 * never matches a stat: its file was just hashed again because of that, and may differ from the entry.
 */
export const recordFolders = (root: string, index: WorkIndex, scanned: ScanResult): Effect.Effect<void, CliFailure> => {
  if (!scanned.sameNames || scanned.foldersKept || !settledSince(index, scanned.folders)) return Effect.void
  const files = new Map<string, IndexEntry>()
  for (const [file, entry] of index.files) files.set(file, entry.mtimeMs < index.writtenAt ? entry : { ...entry, size: -1 })
  return writeIndex(root, files, index.base, index.dirs, scanned.folders)
}

/** Some directory of `folders` is recorded settled and not as `index` recorded it. */
const settledSince = (index: WorkIndex, folders: ReadonlyMap<string, FolderStat>): boolean => {
  for (const [dir, f] of folders) {
    const known = index.folders.get(dir)
    if (f.ctimeMs !== UNSETTLED_CTIME && (known?.mtimeMs !== f.mtimeMs || known.ctimeMs !== f.ctimeMs || known.ino !== f.ino)) return true
  }
  return false
}

/** The files `found` changed, hashed (a symlink: its target) with their stat now, as a walk's scan hashes them. */
const hashEdits = async (root: string, index: WorkIndex, found: ColumnsChanged): Promise<ReadonlyArray<Edit> | undefined> => {
  const changed = changedFiles(root, index, found)
  if (changed === undefined) return undefined
  return mapLimit(changed, 16, async ({ absolute, before, path: file, stats, symlink }) => {
    const hash = symlink ? Objects.Blake3.hash(await fs.readlink(absolute)) : await hashFile(absolute, stats.size)
    return { path: file, before, after: entryOf(hash, modeOf(stats, symlink), stats) }
  })
}

/** The index's entries with `edits` in place of theirs (same names, same order). */
const withEdits = (files: ReadonlyMap<string, IndexEntry>, edits: ReadonlyArray<Edit>): ReadonlyMap<string, IndexEntry> => {
  const edited = new Map(files)
  for (const { after, path: file } of edits) edited.set(file, after)
  return edited
}
