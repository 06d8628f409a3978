/**
 * The working-tree index (`.grove/index.json`) and the question every content
 * command asks first: does the tree still hold exactly the files the index
 * describes? Node built-ins only, so the no-op push check (`NoopPush.ts`) can
 * answer it before Effect is loaded.
 *
 * An entry is trusted when size, mtime, ctime, inode and file kind match and its
 * mtime is older than the index itself (the racy-timestamp rule: a file changed
 * in the same clock tick as the index was written may have changed unseen). The
 * ctime, as in git's index, catches a rewrite whose mtime was put back (`touch
 * -r`, `rsync -t`, tar): no call can set it. `base` is
 * the commit whose files the index holds exactly, when known: an unchanged tree
 * at that commit needs no tree read and no hashing.
 */
import type { Dirent, Stats } from "node:fs"
import * as fs from "node:fs"
import * as path from "node:path"

type Hash = string
export type BlobMode = "regular" | "executable" | "symlink"

export interface IndexEntry {
  readonly hash: Hash
  readonly mode: BlobMode
  readonly size: number
  readonly mtimeMs: number
  readonly ino: number
  /** Absent in entries of an index written before ctime was kept: not compared then. */
  readonly ctimeMs?: number | undefined
}

/** The entry for a file just hashed or written. */
export const entryOf = (hash: Hash, mode: BlobMode, stats: Stats): IndexEntry => ({
  hash,
  mode,
  size: stats.size,
  mtimeMs: stats.mtimeMs,
  ino: stats.ino,
  ctimeMs: stats.ctimeMs
})

export interface WorkIndex {
  /** When the index was written: an entry modified at or after this may have changed unseen ("racily clean"). */
  readonly writtenAt: number
  /** The commit whose files are exactly `files` (hash and mode), or null when not known. */
  readonly base: Hash | null
  readonly files: ReadonlyMap<string, IndexEntry>
  /** The tree hash of each directory of `base` ("" is the root), when known: a commit rebuilds only changed ones. */
  readonly dirs: ReadonlyMap<string, Hash>
}

export const EMPTY_INDEX: WorkIndex = { writtenAt: 0, base: null, files: new Map(), dirs: new Map() }

const IGNORED_DIRS = new Set([".grove", ".git"])

export const indexPath = (root: string): string => path.join(root, ".grove", "index.json")

/** One file in the index file: an array per file parses twice as fast as an object keyed by path. */
type IndexRow = readonly [path: string, hash: Hash, mode: BlobMode, size: number, mtimeMs: number, ino: number, ctimeMs?: number]

/** The first layout (an object keyed by path), still read so an upgrade does not re-hash the tree. */
type LegacyRow = readonly [hash: Hash, mode: BlobMode, size: number, mtimeMs: number, ino: number]

/**
 * An index from its text. `fileMtimeMs` is the index file's own mtime: the file system's clock,
 * the one file mtimes come from, so the racy rule uses the earlier of it and the recorded time.
 */
export const parseIndex = (text: string, fileMtimeMs: number): WorkIndex => {
  try {
    const parsed = JSON.parse(text) as {
      written_at: number
      base?: Hash | null
      files: ReadonlyArray<IndexRow> | Record<string, LegacyRow>
      dirs?: ReadonlyArray<readonly [string, Hash]>
    }
    const files = new Map<string, IndexEntry>()
    if (Array.isArray(parsed.files)) {
      for (const [file, hash, mode, size, mtimeMs, ino, ctimeMs] of parsed.files) {
        files.set(file, ctimeMs === undefined ? { hash, mode, size, mtimeMs, ino } : { hash, mode, size, mtimeMs, ino, ctimeMs })
      }
    } else {
      for (const [file, [hash, mode, size, mtimeMs, ino]] of Object.entries(parsed.files)) files.set(file, { hash, mode, size, mtimeMs, ino })
    }
    const writtenAt = Math.min(Number(parsed.written_at) || 0, fileMtimeMs)
    const base = typeof parsed.base === "string" ? parsed.base : null
    return { writtenAt, base, files, dirs: new Map(base === null ? [] : parsed.dirs ?? []) }
  } catch {
    return EMPTY_INDEX // a broken index only costs re-hashing
  }
}

/**
 * The last index read, by file identity, until this process writes one: the no-op push check and
 * the push that follows parse it once.
 */
let lastRead: { readonly key: string; readonly index: WorkIndex } | undefined

/** Called on every index write. */
export const forgetIndexRead = (): void => {
  lastRead = undefined
}

/** The index of the checkout at `root`; empty when there is none. */
export const readIndexSync = (root: string): WorkIndex => {
  let fd: number
  try {
    fd = fs.openSync(indexPath(root), "r")
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return EMPTY_INDEX
    throw error
  }
  try {
    const stats = fs.fstatSync(fd)
    // Written only by rename of a new file: a new inode or mtime means new content.
    const key = `${indexPath(root)}\0${stats.ino}\0${stats.mtimeMs}\0${stats.size}`
    if (lastRead?.key === key) return lastRead.index
    const index = parseIndex(fs.readFileSync(fd, "utf8"), stats.mtimeMs)
    lastRead = { key, index }
    return index
  } finally {
    fs.closeSync(fd)
  }
}

export const serializeIndex = (
  files: ReadonlyMap<string, IndexEntry>,
  base: Hash | null,
  dirs: ReadonlyMap<string, Hash>,
  writtenAt: number
): string => {
  const rows: Array<IndexRow> = []
  for (const [file, e] of files) {
    rows.push(e.ctimeMs === undefined ? [file, e.hash, e.mode, e.size, e.mtimeMs, e.ino] : [file, e.hash, e.mode, e.size, e.mtimeMs, e.ino, e.ctimeMs])
  }
  return `${JSON.stringify({ written_at: writtenAt, base, files: rows, dirs: base === null ? [] : [...dirs] })}\n`
}

export interface Found {
  readonly path: string
  readonly symlink: boolean
}

/**
 * Visits every file under `root` until `visit` answers false; false then. Synchronous on purpose: a
 * walk is thousands of tiny system calls, and the promise API sends each through the thread pool
 * (5,000 files: ~300 ms async, ~20 ms sync).
 */
export const everyFile = (root: string, visit: (file: string, symlink: boolean) => boolean): boolean => {
  const pending = [""]
  for (let relative = pending.pop(); relative !== undefined; relative = pending.pop()) {
    let entries: Array<Dirent>
    try {
      entries = fs.readdirSync(path.join(root, relative), { withFileTypes: true })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue // removed while walking
      throw error
    }
    for (const entry of entries) {
      const file = relative === "" ? entry.name : `${relative}/${entry.name}`
      if (entry.isDirectory()) {
        if (!IGNORED_DIRS.has(entry.name)) pending.push(file)
      } else if (entry.isFile() || entry.isSymbolicLink()) {
        if (!visit(file, entry.isSymbolicLink())) return false
      }
      // Sockets, FIFOs and devices are not content.
    }
  }
  return true
}

/** Every file under `root`. */
export const walk = (root: string): Array<Found> => {
  const found: Array<Found> = []
  everyFile(root, (file, symlink) => found.push({ path: file, symlink }) > 0)
  return found
}

export const modeOf = (stats: Stats, symlink: boolean): BlobMode =>
  symlink ? "symlink" : (stats.mode & 0o111) !== 0 ? "executable" : "regular"

/** The entry still describes the file's bytes: same size, mtime, ctime, inode and kind, and not racily clean. */
export const statMatches = (known: IndexEntry | undefined, stats: Stats, symlink: boolean, writtenAt: number): known is IndexEntry =>
  known !== undefined && known.size === stats.size && known.mtimeMs === stats.mtimeMs && known.ino === stats.ino &&
  (known.ctimeMs === undefined || known.ctimeMs === stats.ctimeMs) &&
  (known.mode === "symlink") === symlink && stats.mtimeMs < writtenAt

/**
 * True when the tree holds exactly the index's files, each with a matching stat and the same mode:
 * the tree's snapshot is then the index's, without reading or hashing a file. Stops at the first difference.
 */
export const treeUnchanged = (root: string, index: WorkIndex): boolean => {
  let seen = 0
  const same = everyFile(root, (file, symlink) => {
    seen++
    const known = index.files.get(file)
    if (known === undefined) return false
    const stats = fs.lstatSync(`${root}/${file}`, { throwIfNoEntry: false })
    return stats !== undefined && statMatches(known, stats, symlink, index.writtenAt) && known.mode === modeOf(stats, symlink)
  })
  return same && seen === index.files.size
}

/** The snapshot (path -> hash and mode) an index describes. */
export const indexSnapshot = (index: WorkIndex): Map<string, { readonly hash: Hash; readonly mode: BlobMode }> => {
  const snapshot = new Map<string, { readonly hash: Hash; readonly mode: BlobMode }>()
  for (const [file, entry] of index.files) snapshot.set(file, { hash: entry.hash, mode: entry.mode })
  return snapshot
}
