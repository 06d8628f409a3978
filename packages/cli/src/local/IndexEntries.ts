/**
 * The working-tree index in memory: an entry per file (size, mtime, ctime, inode, kind and hash), `base` (the commit
 * whose files it holds exactly, when known), each directory's stat from the walk that made it, and the snapshot it
 * describes. The file's layouts are IndexLayout.ts, the file itself IndexFile.ts. Node built-ins only (see TreeStatus.ts).
 */
import type { Stats } from "node:fs"

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

export const EMPTY_INDEX: WorkIndex = { writtenAt: 0, base: null, files: new Map(), dirs: new Map(), folders: NO_FOLDERS }

/** The snapshot (path -> hash and mode) of index entries. */
export const snapshotOf = (files: ReadonlyMap<string, IndexEntry>): Map<string, { readonly hash: Hash; readonly mode: BlobMode }> => {
  const snapshot = new Map<string, { readonly hash: Hash; readonly mode: BlobMode }>()
  for (const [file, entry] of files) snapshot.set(file, { hash: entry.hash, mode: entry.mode })
  return snapshot
}

/** The snapshot an index describes. */
export const indexSnapshot = (index: WorkIndex): Map<string, { readonly hash: Hash; readonly mode: BlobMode }> => snapshotOf(index.files)
