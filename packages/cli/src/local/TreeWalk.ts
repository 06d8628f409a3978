/**
 * The walk of a working tree: every file under the root but `.grove` and `.git`, and none under a directory that holds
 * another checkout's `.grove` (finished or not, and holding no file this checkout tracks: `groveAt`; git's rule for a
 * nested repository: its files are its own, never new files of this one). Like git's untracked cache, a
 * directory whose mtime, ctime and inode are as the index recorded them (and older than the index) holds the same
 * names, since adding, removing or renaming an entry changes them, so the walk lists it from the index instead of
 * reading it. A directory changed less than `SETTLE_MS` before the walk began is recorded as unsettled: a name added
 * in the timestamp tick the walk read it in leaves its stat as read, so it is read again. Node built-ins only.
 */
import type { Dirent } from "node:fs"
import * as fs from "node:fs"
import type { FolderStat, IndexEntry } from "./IndexFile.ts"
import { CTIME_MS, INO, isDirectory, MTIME_MS, statRow } from "./StatValues.ts"

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

/** Never walked, at any depth (nor watched: watch/WatchDaemon.ts). */
export const IGNORED_DIRS: ReadonlySet<string> = new Set([".grove", ".git"])

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
const folderMatches = (known: FolderStat | undefined, now: FolderStat, writtenAt: number): boolean =>
  known !== undefined && known.mtimeMs === now.mtimeMs && known.ctimeMs === now.ctimeMs && known.ino === now.ino &&
  now.mtimeMs < writtenAt && now.ctimeMs < writtenAt

/**
 * The directory `dir` of `root` matches its record, as `folderMatches` tells of its stat now (following a symlink, as a
 * walk reads it; a directory). No stat object is made: a no-op push at 20k files checks ~1,250 directories.
 */
const folderAsRecorded = (root: string, dir: string, mtimeMs: number, ctimeMs: number, ino: number, writtenAt: number): boolean => {
  const now = statRow(dir === "" ? root : `${root}/${dir}`)
  return now !== undefined && isDirectory(now) && now[MTIME_MS] === mtimeMs && now[CTIME_MS] === ctimeMs && now[INO] === ino &&
    now[MTIME_MS]! < writtenAt && now[CTIME_MS]! < writtenAt
}

/** The recorded directories (`cache.folders` itself) when each still matches its record, else undefined. */
export const foldersAsRecorded = (
  root: string,
  cache: Pick<WalkCache, "folders" | "writtenAt">
): ReadonlyMap<string, FolderStat> | undefined => {
  if (!cache.folders.has("")) return undefined
  for (const [dir, known] of cache.folders) {
    if (!folderAsRecorded(root, dir, known.mtimeMs, known.ctimeMs, known.ino, cache.writtenAt)) return undefined
  }
  return cache.folders
}

/**
 * `foldersAsRecorded` on the index file's rows of them (path, mtime, ctime, inode each: IndexFile.indexFolderRows), as
 * the index's `folders` is made of them but without making it: true when the root and every directory are as recorded.
 */
export const folderRowsAsRecorded = (root: string, rows: ReadonlyArray<number | string>, writtenAt: number): boolean => {
  let sawRoot = false
  for (let i = 0; i + 3 < rows.length; i += 4) {
    const dir = String(rows[i])
    if (dir === "") sawRoot = true
    if (!folderAsRecorded(root, dir, Number(rows[i + 1]), Number(rows[i + 2]), Number(rows[i + 3]), writtenAt)) return false
  }
  return sawRoot
}

/** What a clone writes in `.grove` before its config.json, last (commands/Init.ts), and their temporary files `NAME.*`. */
const CLONE_WRITES = ["objects", "tmp", "state.json", "withheld.json", "index.json", "config.json"]

/** `name` in a `.grove` is one a clone writes (Checkout.ts tells an unfinished clone by it). */
export const cloneWrote = (name: string): boolean =>
  CLONE_WRITES.some((known) => name === known || name.startsWith(`${known}.`))

/** The index tracks a file under `prefix` (a `DIR/`: a folder of the outer checkout's, never another checkout's). */
export const tracksUnder = (files: ReadonlyMap<string, unknown>, prefix: string): boolean => {
  for (const file of files.keys()) if (file.startsWith(prefix)) return true
  return false
}

/**
 * What the `.grove` directory among `entries` (the listing of `dir`, `rel` under the root) makes of `dir`: "checkout",
 * another checkout's root, when it looks like grove's own (it holds config.json, or only what a clone writes: an
 * unfinished clone, an empty one included) and `index` (the outer checkout's, when known) tracks nothing in `dir`;
 * "tracked" when it does (the outer checkout's folder); "content" for any other `.grove` directory (made by hand: no
 * tree holds one at any depth, Tree.dotGroveIn); undefined for none. Only a checkout's folder is left out of the
 * walk: content never is, so an empty or stray `.grove` never shows its folder's files as removed.
 */
export const groveAt = (
  dir: string,
  rel: string,
  entries: ReadonlyArray<Dirent>,
  index?: { readonly files: ReadonlyMap<string, unknown> }
): "checkout" | "tracked" | "content" | undefined => {
  let grove = false
  for (const entry of entries) if (entry.name === ".grove" && entry.isDirectory()) grove = true
  if (!grove) return undefined
  // A folder the outer checkout tracks files in stays its own whatever its `.grove` holds (git keeps tracking files under a
  // nested repository too): an empty `.grove` made there must never turn every tracked file under it into a deletion.
  if (index !== undefined && tracksUnder(index.files, `${rel}/`)) return "tracked"
  let names: Array<string>
  try {
    names = fs.readdirSync(`${dir}/.grove`)
  } catch {
    return "content" // gone meanwhile, or unreadable: not known to be a checkout
  }
  return names.includes("config.json") || names.every(cloneWrote) ? "checkout" : "content"
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
    if (relative !== "") {
      const grove = groveAt(dir, relative, entries, cache)
      // Another checkout's root: recorded (above) with no names, so when its `.grove` goes its changed stat has it read.
      if (grove === "checkout") continue
      // A `.grove` of content may become a checkout's (`grove init` there, or the index no longer tracking under it) with
      // no change to this directory's stat: recorded unsettled, the directory is read and judged again by every walk
      // (rare: a `.grove` that is not grove's own).
      const stat = grove !== undefined ? seen?.get(relative) : undefined
      if (stat !== undefined) seen!.set(relative, { mtimeMs: stat.mtimeMs, ctimeMs: UNSETTLED_CTIME, ino: stat.ino })
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
