/**
 * The question every content command asks first: does the working tree still hold exactly the files the index
 * (IndexFile.ts) describes? Node built-ins only, so the no-op push check (`NoopPush.ts`) can answer it before Effect
 * is loaded.
 *
 * An entry is trusted when size, mtime, ctime, inode and file kind match and its mtime is older than the index
 * itself (the racy-timestamp rule: a file changed in the same clock tick as the index was written may have changed
 * unseen). The ctime, as in git's index, catches a rewrite whose mtime was put back (`touch -r`, `rsync -t`, tar): no
 * call can set it. An unchanged tree at the index's `base` needs no tree read and no hashing. Every file is stat-ed
 * (a changed file does not change its directory); directories as recorded are listed from the index (TreeWalk.ts).
 */
import type { Stats } from "node:fs"
import * as fs from "node:fs"
import type { BlobMode, FolderStat, IndexEntry, WorkIndex } from "./IndexFile.ts"
import { columnEntry, indexColumns, indexFolderRows, reservedPaths } from "./IndexFile.ts"
import { CTIME_MS, INO, lstatRow, MODE, MTIME_MS, NLINK, S_IFLNK, S_IFMT, SIZE } from "./StatValues.ts"
import { everyFile, folderRowsAsRecorded } from "./TreeWalk.ts"

// The index file and the walk live in their own files; the working-tree code imports them all from here.
export * from "./IndexFile.ts"
export * from "./TreeWalk.ts"

export const modeOf = (stats: Stats, symlink: boolean): BlobMode => modeFrom(stats.mode, symlink)

const modeFrom = (mode: number, symlink: boolean): BlobMode => symlink ? "symlink" : (mode & 0o111) !== 0 ? "executable" : "regular"

/** The entry still describes the file's bytes: same size, mtime, ctime, inode and kind, and not racily clean. */
export const statMatches = (known: IndexEntry | undefined, stats: Stats, symlink: boolean, writtenAt: number): known is IndexEntry =>
  known !== undefined && known.size === stats.size && known.mtimeMs === stats.mtimeMs && known.ino === stats.ino &&
  (known.ctimeMs === undefined || known.ctimeMs === stats.ctimeMs) &&
  (known.mode === "symlink") === symlink && stats.mtimeMs < writtenAt

/**
 * True when the tree holds exactly the index's files, each with a matching stat and the same mode:
 * the tree's snapshot is then the index's, without reading or hashing a file. Stops at the first difference.
 * Never for an index tracking a `.grove` path (IndexLayout.reservedPaths): the full command says what to do with it.
 */
export const treeUnchanged = (root: string, index: WorkIndex): boolean => {
  const fast = columnsUnchanged(root, index, false)
  if (fast !== undefined) return fast.same
  if (reservedPaths(index).size > 0) return false
  let seen = 0
  const same = everyFile(root, (file, symlink) => {
    seen++
    const known = index.files.get(file)
    if (known === undefined) return false
    const stats = fs.lstatSync(`${root}/${file}`, { throwIfNoEntry: false })
    return stats !== undefined && stats.isSymbolicLink() === symlink && statMatches(known, stats, symlink, index.writtenAt) &&
      known.mode === modeOf(stats, symlink)
  }, index)
  return same && seen === index.files.size
}

/**
 * `treeUnchanged` without the index's entries, for the common case: every directory is as recorded (so
 * the tree holds the index's names), and each file's stat is compared with the columns as read from the
 * file, in their order. Undefined when it cannot tell this way: no columns (an index made in this process,
 * or a copy), a directory changed, or, with `ctimeRequired`, an entry without a ctime (a scan then makes a
 * new entry for it). `folders`: the directories' stats, as a walk would have seen them. `linked`: a file has another
 * hard link, through which it can change without an event in its directory (the watcher then keeps no token).
 */
export const columnsUnchanged = (
  root: string,
  index: WorkIndex,
  ctimeRequired: boolean
): { readonly same: boolean; readonly folders: ReadonlyMap<string, FolderStat>; readonly linked: boolean } | undefined => {
  const found = columnsChanged(root, index, ctimeRequired, 1)
  return found && { same: found.changed.length === 0, folders: found.folders, linked: found.linked }
}

/** What `columnsChanged` found: the files whose stat differs from the index's columns, by position in them. */
export interface ColumnsChanged {
  /** Positions in the columns (IndexFile.columnEntry), in their order; all of them unless `limit` was reached. */
  readonly changed: ReadonlyArray<number>
  readonly folders: ReadonlyMap<string, FolderStat>
  /** A file seen has another hard link (every file when `changed` is complete). */
  readonly linked: boolean
}

/**
 * `columnsUnchanged`, going on past a difference: every file whose stat (or kind, or mode) is not the columns', up to
 * `limit` of them. With every directory as recorded the tree has exactly the index's names, so the other files are the
 * index's entries: a scan hashes only these (`grove status` with one change in 20k files reads no tree and makes no
 * snapshot of the others).
 */
export const columnsChanged = (root: string, index: WorkIndex, ctimeRequired: boolean, limit = Infinity): ColumnsChanged | undefined => {
  const columns = indexColumns(index)
  const rows = indexFolderRows(index)
  // Read from the index file's rows: a no-op push makes no map of the directories (only a scan needs it, from `folders`).
  if (columns === undefined || rows === undefined || !folderRowsAsRecorded(root, rows, index.writtenAt)) return undefined
  const { modes, paths, stats } = columns
  const { writtenAt } = index
  const changed: Array<number> = []
  let linked = false
  // Once per file at 20k files (a no-op push): written out, without a call per field (ctimeOf, modeFrom, isSymbolicLink).
  for (let i = 0; i < paths.length; i++) {
    const ctimeMs = stats[4 * i + 3]
    const ctimeKnown = ctimeMs != null && !Number.isNaN(ctimeMs) // see ctimeOf
    if (!ctimeKnown && ctimeRequired) return undefined
    // From the root itself (NoopPush.ts), the paths as they are: no string to build.
    const now = lstatRow(root === "." ? paths[i]! : `${root}/${paths[i]}`)
    let same = false
    if (now !== undefined) {
      const mode = now[MODE]!
      // The kind and mode as MODE_LETTER writes them: a symlink is "l" whatever its bits (modeFrom).
      const letter = (mode & S_IFMT) === S_IFLNK ? "l" : (mode & 0o111) !== 0 ? "x" : "r"
      const mtimeMs = now[MTIME_MS]!
      same = letter === modes[i] && now[SIZE] === stats[4 * i] && mtimeMs === stats[4 * i + 1] && now[INO] === stats[4 * i + 2] &&
        (!ctimeKnown || now[CTIME_MS] === ctimeMs) && mtimeMs < writtenAt
      if (now[NLINK]! > 1) linked = true
    }
    if (!same && changed.push(i) >= limit) break
  }
  return {
    changed,
    get folders() {
      return index.folders // all as recorded
    },
    linked
  }
}

/** A file of the index that `columnsChanged` found changed, with its entry in the index and its stat now. */
export interface ChangedFile {
  readonly path: string
  readonly absolute: string
  readonly before: IndexEntry
  readonly stats: Stats
  readonly symlink: boolean
}

/**
 * The files `found` changed, each with its index entry and its stat now, to be hashed (the full command's scan and the
 * quick status, EditedFiles.ts); undefined when one is gone or no longer a file or symlink (a walk then sees what is there).
 */
export const changedFiles = (root: string, index: WorkIndex, found: ColumnsChanged): ReadonlyArray<ChangedFile> | undefined => {
  const columns = indexColumns(index)
  if (columns === undefined) return undefined
  const changed: Array<ChangedFile> = []
  for (const i of found.changed) {
    const file = columns.paths[i]!
    const absolute = `${root}/${file}`
    const stats = fs.lstatSync(absolute, { throwIfNoEntry: false })
    if (stats === undefined || !(stats.isFile() || stats.isSymbolicLink())) return undefined
    changed.push({ path: file, absolute, before: columnEntry(columns, i), stats, symlink: stats.isSymbolicLink() })
  }
  return changed
}

/** A complete pass that found changes, kept for the scan of the full command that follows in this process. */
let keptPass: { readonly root: string; readonly index: WorkIndex; readonly found: ColumnsChanged } | undefined

/**
 * Keeps a complete `columnsChanged` pass of the checkout at `root` (absolute) that found changes: a quick command
 * (NoopPush.ts) that cannot answer hands the full command's scan its stats instead of having every file stat-ed again.
 */
export const keepPass = (root: string, index: WorkIndex, found: ColumnsChanged): void => {
  keptPass = { root, index, found }
}

/**
 * The kept pass, once, when it was of this very index (the same object: the file was not rewritten since) at `root`.
 * A change after that pass is as a change just after this scan: the next command sees it (each entry keeps the stat
 * it was compared with). Not with a watcher's token (WatchClient.tokenBeforeScan), which must be taken before any stat.
 */
export const takePass = (root: string, index: WorkIndex): ColumnsChanged | undefined => {
  const kept = keptPass
  keptPass = undefined
  return kept !== undefined && kept.root === root && kept.index === index ? kept.found : undefined
}
