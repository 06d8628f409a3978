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
 *
 * Like git's untracked cache, the index also keeps each directory's stat from
 * the walk that made it (`folders`): a directory whose mtime, ctime and inode
 * are the same (and older than the index) holds the same names, since adding,
 * removing or renaming an entry changes them, so the walk lists it from the index instead
 * of reading it. Every file is still stat-ed: a changed file does not change its directory.
 * A directory changed less than `SETTLE_MS` before the walk began is recorded as unsettled: a name
 * added in the timestamp tick the walk read it in leaves its stat as read, so it is read again.
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
  /** Every directory the walk that made `files` went through ("" is the root), with its stat then. */
  readonly folders: ReadonlyMap<string, FolderStat>
}

/** A directory's stat as a walk saw it before reading it. */
export interface FolderStat {
  readonly mtimeMs: number
  readonly ctimeMs: number
  readonly ino: number
}

export const NO_FOLDERS: ReadonlyMap<string, FolderStat> = new Map()

/**
 * How long before a walk a directory must have last changed for its recorded stat to be trusted later:
 * more than a timestamp tick (a few ms on ext4; 1-2 s on FAT, exFAT, HFS+ and some network file systems).
 */
export const SETTLE_MS = 2_000

/** A ctime no directory has: the record never matches, so the directory is read again (its names stay listed). */
export const UNSETTLED_CTIME = -1

/** The stat to record for a directory: unsettled when it changed at or after `settledBefore`. */
const recorded = (stat: FolderStat, settledBefore: number): FolderStat =>
  stat.mtimeMs < settledBefore && stat.ctimeMs < settledBefore ? stat : { mtimeMs: stat.mtimeMs, ctimeMs: UNSETTLED_CTIME, ino: stat.ino }

export const EMPTY_INDEX: WorkIndex = { writtenAt: 0, base: null, files: new Map(), dirs: new Map(), folders: NO_FOLDERS }

const IGNORED_DIRS = new Set([".grove", ".git"])

export const indexPath = (root: string): string => path.join(root, ".grove", "index.json")

/**
 * The index file's layout: one column per field (a 20,000-file index parses in a fifth of the time
 * an array per file took, which matters to the no-op push). `stats` holds size, mtime, inode and
 * ctime per file (ctime null when unknown); `modes` one letter per file.
 */
interface ColumnIndex {
  readonly written_at: number
  readonly base: Hash | null
  readonly paths: ReadonlyArray<string>
  readonly hashes: string
  readonly modes: string
  readonly stats: ReadonlyArray<number | null>
  readonly dirs: ReadonlyArray<readonly [string, Hash]>
  /** path, mtime, ctime, inode per directory. */
  readonly folders?: ReadonlyArray<number | string>
}

const MODE_LETTER: Record<BlobMode, string> = { regular: "r", executable: "x", symlink: "l" }
const LETTER_MODE: Record<string, BlobMode> = { r: "regular", x: "executable", l: "symlink" }
const HASH_LENGTH = 64

/** The second layout (an array per file), still read so an upgrade does not re-hash the tree. */
type IndexRow = readonly [path: string, hash: Hash, mode: BlobMode, size: number, mtimeMs: number, ino: number, ctimeMs?: number]

/** The first layout (an object keyed by path), still read so an upgrade does not re-hash the tree. */
type LegacyRow = readonly [hash: Hash, mode: BlobMode, size: number, mtimeMs: number, ino: number]

/**
 * An index from its text. `fileMtimeMs` is the index file's own mtime: the file system's clock,
 * the one file mtimes come from, so the racy rule uses the earlier of it and the recorded time.
 */
export const parseIndex = (text: string, fileMtimeMs: number): WorkIndex => {
  try {
    const parsed = JSON.parse(text) as Partial<ColumnIndex> & {
      written_at: number
      files?: ReadonlyArray<IndexRow> | Record<string, LegacyRow>
    }
    const writtenAt = Math.min(Number(parsed.written_at) || 0, fileMtimeMs)
    const base = typeof parsed.base === "string" ? parsed.base : null
    const dirs = new Map(base === null ? [] : parsed.dirs ?? [])
    const folders = new Map<string, FolderStat>()
    const rows = parsed.folders ?? []
    for (let i = 0; i + 3 < rows.length; i += 4) {
      folders.set(String(rows[i]), { mtimeMs: Number(rows[i + 1]), ctimeMs: Number(rows[i + 2]), ino: Number(rows[i + 3]) })
    }
    if (parsed.paths !== undefined) {
      const { hashes = "", modes = "", paths, stats = [] } = parsed
      const n = paths.length
      if (!Array.isArray(paths) || hashes.length < n * HASH_LENGTH || stats.length < 4 * n || !/^[rxl]*$/.test(modes) || modes.length < n) {
        throw new Error("a short column")
      }
      // The entries are made when first asked for: an unchanged tree is checked against the columns alone.
      const columns: IndexColumns = { paths, hashes, modes, stats }
      let files: Map<string, IndexEntry> | undefined
      const index: WorkIndex = {
        writtenAt,
        base,
        get files() {
          return files ??= entriesOf(columns)
        },
        dirs,
        folders
      }
      columnsOf.set(index, columns)
      return index
    }
    const files = new Map<string, IndexEntry>()
    if (Array.isArray(parsed.files)) {
      for (const [file, hash, mode, size, mtimeMs, ino, ctimeMs] of parsed.files) {
        files.set(file, ctimeMs === undefined ? { hash, mode, size, mtimeMs, ino } : { hash, mode, size, mtimeMs, ino, ctimeMs })
      }
    } else {
      for (const [file, [hash, mode, size, mtimeMs, ino]] of Object.entries(parsed.files ?? {})) files.set(file, { hash, mode, size, mtimeMs, ino })
    }
    return { writtenAt, base, files, dirs, folders }
  } catch {
    return EMPTY_INDEX // a broken index only costs re-hashing
  }
}

/** The columns of an index read from the file, as read (`WorkIndex.files` is made from them when first used). */
interface IndexColumns {
  readonly paths: ReadonlyArray<string>
  readonly hashes: string
  readonly modes: string
  readonly stats: ReadonlyArray<number | null>
}

/** By index object: a copy (`{ ...index, files }`) has none, so it is never checked against columns it does not hold. */
const columnsOf = new WeakMap<WorkIndex, IndexColumns>()

const entriesOf = ({ hashes, modes, paths, stats }: IndexColumns): Map<string, IndexEntry> => {
  const files = new Map<string, IndexEntry>()
  for (let i = 0; i < paths.length; i++) {
    const mode = LETTER_MODE[modes[i]!]!
    const size = stats[4 * i] as number, mtimeMs = stats[4 * i + 1] as number, ino = stats[4 * i + 2] as number
    const ctimeMs = stats[4 * i + 3]
    const hash = hashes.slice(i * HASH_LENGTH, (i + 1) * HASH_LENGTH)
    files.set(paths[i]!, ctimeMs == null ? { hash, mode, size, mtimeMs, ino } : { hash, mode, size, mtimeMs, ino, ctimeMs })
  }
  return files
}

/**
 * The last index read, by file identity, until this process writes one: the no-op push check and
 * the push that follows parse it once.
 */
let lastRead: { readonly key: string; readonly index: WorkIndex } | undefined

/** The index file an index was read from (path, inode, mtime, size: it is replaced by rename), by index object. */
const fileKeys = new WeakMap<WorkIndex, string>()

/** The file an index was read from, as a key that changes with every write of it; undefined when not read from one. */
export const indexFileKey = (index: WorkIndex): string | undefined => fileKeys.get(index)

/** Called on every index write. */
export const forgetIndexRead = (): void => {
  lastRead = undefined
}

/** The key `indexFileKey` gives an index read from a file with this stat. */
export const indexKeyOf = (root: string, stats: Pick<Stats, "ino" | "mtimeMs" | "size">): string =>
  `${indexPath(root)}\0${stats.ino}\0${stats.mtimeMs}\0${stats.size}`

/** The first fields of the index as serializeIndex writes them (written_at, then base). */
const INDEX_HEAD = /^\{"written_at":[0-9.e+-]+,"base":(?:null|"([0-9a-f]{64})")/

/**
 * The index file's key (`indexFileKey`) and base commit from its first bytes, without parsing the rest (20,000
 * files: ~20 ms); undefined when there is no index or its head is not in that form.
 */
export const readIndexHead = (root: string): { readonly key: string; readonly base: string | null } | undefined => {
  let fd: number
  try {
    fd = fs.openSync(indexPath(root), "r")
  } catch {
    return undefined
  }
  try {
    const stats = fs.fstatSync(fd)
    const head = Buffer.alloc(160)
    const match = INDEX_HEAD.exec(head.toString("utf8", 0, fs.readSync(fd, head, 0, head.length, 0)))
    return match === null ? undefined : { key: indexKeyOf(root, stats), base: match[1] ?? null }
  } finally {
    fs.closeSync(fd)
  }
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
    const key = indexKeyOf(root, stats)
    if (lastRead?.key === key) return lastRead.index
    const index = parseIndex(fs.readFileSync(fd, "utf8"), stats.mtimeMs)
    if (index !== EMPTY_INDEX) fileKeys.set(index, key)
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
  writtenAt: number,
  folders: ReadonlyMap<string, FolderStat> = NO_FOLDERS
): string => {
  const paths: Array<string> = []
  const hashes: Array<string> = []
  let modes = ""
  const stats: Array<number | null> = []
  for (const [file, e] of files) {
    if (e.hash.length !== HASH_LENGTH) throw new Error(`not a blob hash: ${e.hash}`)
    paths.push(file)
    hashes.push(e.hash)
    modes += MODE_LETTER[e.mode]
    stats.push(e.size, e.mtimeMs, e.ino, e.ctimeMs ?? null)
  }
  const folderRows: Array<number | string> = []
  for (const [dir, f] of folders) folderRows.push(dir, f.mtimeMs, f.ctimeMs, f.ino)
  const index: ColumnIndex = {
    written_at: writtenAt,
    base,
    paths,
    hashes: hashes.join(""),
    modes,
    stats,
    dirs: base === null ? [] : [...dirs],
    folders: folderRows
  }
  return `${JSON.stringify(index)}\n`
}

export interface Found {
  readonly path: string
  readonly symlink: boolean
}

/** What a walk may take from the index: the names of each directory whose stat is as recorded. */
export interface WalkCache {
  readonly writtenAt: number
  readonly files: ReadonlyMap<string, IndexEntry>
  readonly folders: ReadonlyMap<string, FolderStat>
}

const parentOf = (file: string): string => {
  const slash = file.lastIndexOf("/")
  return slash < 0 ? "" : file.slice(0, slash)
}

/** The recorded names of each directory: its files (and whether each is a symlink) and subdirectories. */
const listingsOf = (cache: WalkCache) => {
  const listings = new Map<string, { files: Array<string>; links: Array<boolean>; dirs: Array<string> }>()
  for (const dir of cache.folders.keys()) listings.set(dir, { files: [], links: [], dirs: [] })
  for (const dir of cache.folders.keys()) if (dir !== "") listings.get(parentOf(dir))?.dirs.push(dir)
  for (const [file, entry] of cache.files) {
    const listing = listings.get(parentOf(file))
    if (listing === undefined) return undefined // not from one walk: trust none of it
    listing.files.push(file)
    listing.links.push(entry.mode === "symlink")
  }
  return listings
}

/**
 * The directory still holds the names it held: same mtime, ctime and inode, and not changed in the
 * clock tick the index was written (the racy rule, as for files).
 */
const folderMatches = (known: FolderStat | undefined, stats: fs.Stats, writtenAt: number): boolean =>
  known !== undefined && known.mtimeMs === stats.mtimeMs && known.ctimeMs === stats.ctimeMs && known.ino === stats.ino &&
  stats.mtimeMs < writtenAt && stats.ctimeMs < writtenAt

/** Every recorded directory's stat when each still matches its record (see `folderMatches`), else undefined. */
const foldersAsRecorded = (root: string, cache: Pick<WalkCache, "folders" | "writtenAt">): Map<string, FolderStat> | undefined => {
  if (!cache.folders.has("")) return undefined
  const stats = new Map<string, FolderStat>()
  for (const [dir, known] of cache.folders) {
    const now = fs.statSync(dir === "" ? root : `${root}/${dir}`, { throwIfNoEntry: false })
    if (now === undefined || !now.isDirectory() || !folderMatches(known, now, cache.writtenAt)) return undefined
    stats.set(dir, known)
  }
  return stats
}

/**
 * Visits every file under `root` until `visit` answers false; false then. Synchronous on purpose: a
 * walk is thousands of tiny system calls, and the promise API sends each through the thread pool
 * (5,000 files: ~300 ms async, ~20 ms sync). With `cache`, a directory whose stat is as recorded is
 * listed from it instead of read. `seen` gets the stat of every directory walked (taken before it is
 * read, so a change while reading shows next time; when read, unsettled if it changed at or after `settledBefore`).
 */
export const everyFile = (
  root: string,
  visit: (file: string, symlink: boolean) => boolean,
  cache?: WalkCache,
  seen?: Map<string, FolderStat>,
  settledBefore: number = Date.now() - SETTLE_MS
): boolean => {
  if (cache !== undefined && cache.folders.size > 0) {
    // Most often nothing was added or removed anywhere: every directory as recorded, so the files are the index's.
    const stats = foldersAsRecorded(root, cache)
    if (stats !== undefined) {
      if (seen !== undefined) for (const [dir, f] of stats) seen.set(dir, f)
      for (const [file, entry] of cache.files) if (!visit(file, entry.mode === "symlink")) return false
      return true
    }
  }
  const listings = cache === undefined || cache.folders.size === 0 ? undefined : listingsOf(cache)
  const pending = [""]
  for (let relative = pending.pop(); relative !== undefined; relative = pending.pop()) {
    const dir = relative === "" ? root : `${root}/${relative}`
    if (listings !== undefined || seen !== undefined) {
      const stats = fs.statSync(dir, { throwIfNoEntry: false })
      if (stats === undefined) continue // removed while walking
      const stat = { mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs, ino: stats.ino }
      const listing = listings?.get(relative)
      if (listing !== undefined && folderMatches(cache!.folders.get(relative), stats, cache!.writtenAt)) {
        seen?.set(relative, stat) // the names of the read that recorded it, judged settled then
        for (let i = 0; i < listing.files.length; i++) if (!visit(listing.files[i]!, listing.links[i]!)) return false
        for (const sub of listing.dirs) pending.push(sub)
        continue
      }
      seen?.set(relative, recorded(stat, settledBefore))
    }
    let entries: Array<Dirent>
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true })
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

/** Every file under `root` (directories as `cache` recorded them listed from it; their stats into `seen`). */
export const walk = (root: string, cache?: WalkCache, seen?: Map<string, FolderStat>, settledBefore?: number): Array<Found> => {
  const found: Array<Found> = []
  everyFile(root, (file, symlink) => found.push({ path: file, symlink }) > 0, cache, seen, settledBefore)
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
  const fast = columnsUnchanged(root, index, false)
  if (fast !== undefined) return fast.same
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
 * new entry for it). `folders`: the directories' stats, as a walk would have seen them.
 */
export const columnsUnchanged = (
  root: string,
  index: WorkIndex,
  ctimeRequired: boolean
): { readonly same: boolean; readonly folders: Map<string, FolderStat> } | undefined => {
  const columns = columnsOf.get(index)
  if (columns === undefined || index.folders.size === 0) return undefined
  const folders = foldersAsRecorded(root, index)
  if (folders === undefined) return undefined
  const { modes, paths, stats } = columns
  const { writtenAt } = index
  for (let i = 0; i < paths.length; i++) {
    const ctimeMs = stats[4 * i + 3]
    if (ctimeMs == null && ctimeRequired) return undefined
    const symlink = modes[i] === "l"
    const now = fs.lstatSync(`${root}/${paths[i]}`, { throwIfNoEntry: false })
    const same = now !== undefined && now.isSymbolicLink() === symlink && now.size === stats[4 * i] &&
      now.mtimeMs === stats[4 * i + 1] && now.ino === stats[4 * i + 2] && (ctimeMs == null || now.ctimeMs === ctimeMs) &&
      now.mtimeMs < writtenAt && MODE_LETTER[modeOf(now, symlink)] === modes[i]
    if (!same) return { same: false, folders }
  }
  return { same: true, folders }
}

/** The snapshot (path -> hash and mode) of index entries. */
export const snapshotOf = (files: ReadonlyMap<string, IndexEntry>): Map<string, { readonly hash: Hash; readonly mode: BlobMode }> => {
  const snapshot = new Map<string, { readonly hash: Hash; readonly mode: BlobMode }>()
  for (const [file, entry] of files) snapshot.set(file, { hash: entry.hash, mode: entry.mode })
  return snapshot
}

/** The snapshot an index describes. */
export const indexSnapshot = (index: WorkIndex): Map<string, { readonly hash: Hash; readonly mode: BlobMode }> => snapshotOf(index.files)
