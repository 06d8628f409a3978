/**
 * The index file's layouts (IndexEntries.ts holds what they encode): the binary one written now, and the JSON ones of
 * older clients, still read so an upgrade does not re-hash the tree. An index read from the binary or column layout
 * keeps its columns, which the unchanged-tree check compares without making the entries (TreeStatus.ts). Node
 * built-ins and core's TreeText (no Effect) only.
 */
import { dotGroveIn, mayHoldDotGrove } from "@grove/core/objects/TreeText"
import type { BlobMode, FolderStat, IndexEntry, WorkIndex } from "./IndexEntries.ts"
import { EMPTY_INDEX, NO_FOLDERS } from "./IndexEntries.ts"

type Hash = string

/**
 * The previous layout, still read: one JSON column per field (a 20,000-file index parses in a fifth of the time an
 * array per file took). `stats` holds size, mtime, inode and ctime per file (ctime null when unknown); `modes` one
 * letter per file. The layout written now (`serializeIndex`) has the same columns, in binary after a JSON line.
 */
interface ColumnIndex {
  readonly written_at: number
  readonly base: Hash | null
  readonly paths: ReadonlyArray<string>
  readonly hashes: string
  readonly modes: string
  readonly stats: ReadonlyArray<number | null>
  readonly dirs: ReadonlyArray<readonly [string, Hash]>
  /** path, mtime, ctime, inode per directory (no longer trusted: BinaryHead.walked). */
  readonly folders?: ReadonlyArray<number | string>
}

export const MODE_LETTER: Record<BlobMode, string> = { regular: "r", executable: "x", symlink: "l" }
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
    if (parsed.paths !== undefined) {
      const { hashes = "", modes = "", paths, stats = [] } = parsed
      const n = paths.length
      if (!Array.isArray(paths) || hashes.length < n * HASH_LENGTH || stats.length < 4 * n || !/^[rxl]*$/.test(modes) || modes.length < n) {
        throw new Error("a short column")
      }
      // Its directories are not trusted (see BinaryHead.walked): each is read once again.
      return columnIndex(writtenAt, base, parsed.dirs, undefined, { paths, hashes, modes, stats }, reservedIn(paths))
    }
    const dirs = new Map(base === null ? [] : parsed.dirs ?? [])
    const folders = NO_FOLDERS // not trusted (see BinaryHead.walked)
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

/** Directories from their rows: path, mtime, ctime, inode each. */
const foldersOf = (rows: ReadonlyArray<number | string>): Map<string, FolderStat> => {
  const folders = new Map<string, FolderStat>()
  for (let i = 0; i + 3 < rows.length; i += 4) {
    folders.set(String(rows[i]), { mtimeMs: Number(rows[i + 1]), ctimeMs: Number(rows[i + 2]), ino: Number(rows[i + 3]) })
  }
  return folders
}

/**
 * An index of columns as read; its entries, directory tree hashes and directory stats are made when first asked for (an
 * unchanged tree is checked against the columns and the directories' rows alone: TreeStatus.columnsChanged).
 */
const columnIndex = (
  writtenAt: number,
  base: Hash | null,
  dirRows: ReadonlyArray<readonly [string, Hash]> | undefined,
  folderRows: ReadonlyArray<number | string> | undefined,
  columns: IndexColumns,
  reserved: ReadonlyMap<string, string>
): WorkIndex => {
  let files: Map<string, IndexEntry> | undefined
  let dirs: ReadonlyMap<string, Hash> | undefined
  let folders: ReadonlyMap<string, FolderStat> | undefined
  const index: WorkIndex = {
    writtenAt,
    base,
    get files() {
      return files ??= entriesOf(columns)
    },
    get dirs() {
      return dirs ??= dirsOf(base === null ? undefined : dirRows)
    },
    get folders() {
      return folders ??= foldersOf(Array.isArray(folderRows) ? folderRows : [])
    }
  }
  reservedOf.set(index, reserved)
  // An index tracking a `.grove` path is never told unchanged from its columns: the full scan lists those paths.
  if (reserved.size > 0) return index
  columnsOf.set(index, columns)
  folderRowsOf.set(index, Array.isArray(folderRows) ? folderRows : [])
  return index
}

/** Directory tree hashes from their rows (none from rows that are not [path, hash] pairs: a commit then rebuilds every tree). */
const dirsOf = (rows: ReadonlyArray<readonly [string, Hash]> | undefined): ReadonlyMap<string, Hash> => {
  try {
    return new Map(rows ?? [])
  } catch {
    return new Map()
  }
}

/**
 * The layout written now: a JSON line (written_at and base first, as `readIndexHead` reads them; `layout`, the file
 * count and the paths' byte length; dirs; the directories as rows, `walked`), then the columns in binary: the paths in UTF-8, each
 * ended by a NUL (no path holds one); one mode letter per file; zeros up to a multiple of 8 bytes from the file's
 * start; size, mtime, inode and ctime per file as float64 in this machine's byte order (ctime NaN when unknown: a
 * checkout's index stays on its machine, and a foreign one's stats never match, which only costs re-hashing); the
 * hashes in hex.
 * A 20,000-file index reads in ~10 ms CPU instead of ~20 ms as JSON (a no-op push reads it every time).
 */
const BINARY_LAYOUT = "columns-binary-1"

interface BinaryHead {
  readonly written_at: number
  readonly base: Hash | null
  readonly layout: typeof BINARY_LAYOUT
  readonly files: number
  readonly path_bytes: number
  readonly dirs: ReadonlyArray<readonly [string, Hash]>
  /**
   * The directories as rows (path, mtime, ctime, inode each). Named anew when the walk's rule changed: an index with
   * `folders` (before a directory holding its own `.grove` was skipped) may list such a directory's files, so its
   * directories are read once again (its entries are kept: nothing is hashed again).
   */
  readonly walked: ReadonlyArray<number | string>
}

const LAYOUT_MARK = `,"layout":"${BINARY_LAYOUT}",`

const padTo8 = (offset: number) => (8 - (offset % 8)) % 8

/** The index in the file's bytes (binary layout, or any earlier JSON one); empty when they are not an index. */
export const parseIndexBytes = (bytes: Buffer, fileMtimeMs: number): WorkIndex => {
  // The layout is named right after written_at and base: a JSON index (one line of megabytes) is not parsed twice.
  const marker = bytes.subarray(0, 256).indexOf(LAYOUT_MARK)
  const newline = marker < 0 ? -1 : bytes.indexOf(10, marker)
  if (newline < 0) return parseIndex(bytes.toString("utf8"), fileMtimeMs)
  try {
    const head = JSON.parse(bytes.toString("utf8", 0, newline)) as Partial<BinaryHead>
    if (head.layout !== BINARY_LAYOUT) throw new Error("another layout")
    const n = Number(head.files), pathBytes = Number(head.path_bytes)
    let at = newline + 1
    const pathsEnd = at + pathBytes
    const statsAt = pathsEnd + n + padTo8(pathsEnd + n)
    if (!Number.isSafeInteger(n) || !Number.isSafeInteger(pathBytes) || n < 0 || statsAt + 32 * n + HASH_LENGTH * n !== bytes.length) {
      throw new Error("not the length its head gives")
    }
    const pathText = n === 0 ? "" : bytes.toString("utf8", at, pathsEnd - 1)
    const paths = n === 0 ? [] : pathText.split("\0")
    at = pathsEnd
    const modes = bytes.toString("latin1", at, at + n)
    if (paths.length !== n || !/^[rxl]*$/.test(modes)) throw new Error("a short column")
    // Float64Array needs 8-byte alignment in its buffer: a view when the read buffer allows it, else a copy.
    const stats = (bytes.byteOffset + statsAt) % 8 === 0
      ? new Float64Array(bytes.buffer, bytes.byteOffset + statsAt, 4 * n)
      : new Float64Array(bytes.buffer.slice(bytes.byteOffset + statsAt, bytes.byteOffset + statsAt + 32 * n))
    const writtenAt = Math.min(Number(head.written_at) || 0, fileMtimeMs)
    const base = typeof head.base === "string" ? head.base : null
    // The hashes as text when first asked for: a check of an unchanged tree never needs them (20k: 1.3 MB, ~1 ms).
    let hashes: string | undefined
    const columns: IndexColumns = {
      paths,
      modes,
      stats,
      get hashes() {
        return hashes ??= bytes.toString("latin1", statsAt + 32 * n)
      }
    }
    // One test of the paths' text (20k paths: ~0.1 ms) for the `.grove` paths an older client tracked.
    return columnIndex(writtenAt, base, head.dirs, head.walked, columns, mayHoldDotGrove(pathText) ? reservedIn(paths) : NONE_RESERVED)
  } catch {
    return EMPTY_INDEX // a broken index only costs re-hashing
  }
}

/** The columns of an index read from the file, as read (`WorkIndex.files` is made from them when first used). */
export interface IndexColumns {
  readonly paths: ReadonlyArray<string>
  readonly hashes: string
  readonly modes: string
  /** Size, mtime, inode, ctime per file; a ctime null (JSON layout) or NaN (binary) is unknown: see `ctimeOf`. */
  readonly stats: ArrayLike<number | null>
}

/** The ctime the columns hold for file `i`, undefined when unknown (an entry from before ctime was kept). */
export const ctimeOf = (stats: ArrayLike<number | null>, i: number): number | undefined => {
  const ctimeMs = stats[4 * i + 3]
  return ctimeMs == null || Number.isNaN(ctimeMs) ? undefined : ctimeMs
}

/** By index object: a copy (`{ ...index, files }`) has none, so it is never checked against columns it does not hold. */
const columnsOf = new WeakMap<WorkIndex, IndexColumns>()

/** By index object, as `columnsOf`: its directories' rows as read (path, mtime, ctime, inode each; `folders` is made of them). */
const folderRowsOf = new WeakMap<WorkIndex, ReadonlyArray<number | string>>()

/** The rows `index.folders` is made of, when it was read from a file (TreeWalk.folderRowsAsRecorded compares them). */
export const indexFolderRows = (index: WorkIndex): ReadonlyArray<number | string> | undefined => folderRowsOf.get(index)

/** The entry the columns hold for file `i` (the file `paths[i]`). */
export const columnEntry = ({ hashes, modes, stats }: IndexColumns, i: number): IndexEntry => {
  const mode = LETTER_MODE[modes[i]!]!
  const size = stats[4 * i] as number, mtimeMs = stats[4 * i + 1] as number, ino = stats[4 * i + 2] as number
  const ctimeMs = ctimeOf(stats, i)
  const hash = hashes.slice(i * HASH_LENGTH, (i + 1) * HASH_LENGTH)
  return ctimeMs === undefined ? { hash, mode, size, mtimeMs, ino } : { hash, mode, size, mtimeMs, ino, ctimeMs }
}

const entriesOf = (columns: IndexColumns): Map<string, IndexEntry> => {
  const files = new Map<string, IndexEntry>()
  const { paths } = columns
  for (let i = 0; i < paths.length; i++) files.set(paths[i]!, columnEntry(columns, i))
  return files
}

/** The index file's bytes, in the binary layout (see `parseIndexBytes`). */
export const serializeIndex = (
  files: ReadonlyMap<string, IndexEntry>,
  base: Hash | null,
  dirs: ReadonlyMap<string, Hash>,
  writtenAt: number,
  folders: ReadonlyMap<string, FolderStat> = NO_FOLDERS
): Buffer => {
  const n = files.size
  const paths: Array<string> = []
  const hashes: Array<string> = []
  let modes = ""
  const stats = new Float64Array(4 * n)
  let i = 0
  for (const [file, e] of files) {
    if (e.hash.length !== HASH_LENGTH) throw new Error(`not a blob hash: ${e.hash}`)
    paths.push(file)
    hashes.push(e.hash)
    modes += MODE_LETTER[e.mode]
    stats[4 * i] = e.size
    stats[4 * i + 1] = e.mtimeMs
    stats[4 * i + 2] = e.ino
    stats[4 * i + 3] = e.ctimeMs ?? Number.NaN
    i++
  }
  const pathBytes = Buffer.from(n === 0 ? "" : `${paths.join("\0")}\0`)
  const folderRows: Array<number | string> = []
  for (const [dir, f] of folders) folderRows.push(dir, f.mtimeMs, f.ctimeMs, f.ino)
  const head: BinaryHead = {
    written_at: writtenAt,
    base,
    layout: BINARY_LAYOUT,
    files: n,
    path_bytes: pathBytes.length,
    dirs: base === null ? [] : [...dirs],
    walked: folderRows
  }
  const headBytes = Buffer.from(`${JSON.stringify(head)}\n`)
  const end = headBytes.length + head.path_bytes + n
  return Buffer.concat([
    headBytes,
    pathBytes,
    Buffer.from(modes, "latin1"),
    Buffer.alloc(padTo8(end)),
    Buffer.from(stats.buffer, stats.byteOffset, stats.byteLength),
    Buffer.from(hashes.join(""), "latin1")
  ])
}

/** The columns `index` was read with, when it was read from a file (TreeStatus.columnsUnchanged compares them). */
export const indexColumns = (index: WorkIndex): IndexColumns | undefined => columnsOf.get(index)

const NONE_RESERVED: ReadonlyMap<string, string> = new Map()

/** By index object, as `columnsOf`: `reservedPaths`, once. */
const reservedOf = new WeakMap<WorkIndex, ReadonlyMap<string, string>>()

const reservedIn = (paths: Iterable<string>): ReadonlyMap<string, string> => {
  let found: Map<string, string> | undefined
  for (const file of paths) {
    const at = dotGroveIn(file)
    if (at !== undefined) (found ??= new Map()).set(file, at)
  }
  return found ?? NONE_RESERVED
}

/**
 * The index's paths a checkout takes for `.grove` (Tree.dotGroveIn), each with that segment (`d/.grove/x` ->
 * `d/.grove`): an older client took them below the root (clone, commit), and no tree may hold them now. None for almost
 * every index. Such an index has no columns: every check of an unchanged tree goes to the walk (WorkingTree.scan).
 */
export const reservedPaths = (index: WorkIndex): ReadonlyMap<string, string> => {
  let reserved = reservedOf.get(index)
  if (reserved === undefined) reservedOf.set(index, reserved = reservedIn(index.files.keys()))
  return reserved
}
