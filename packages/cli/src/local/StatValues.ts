/**
 * The few stat fields the tree checks compare (TreeStatus.columnsChanged, TreeWalk.foldersAsRecorded), for 20,000
 * files in a row without a `fs.Stats` per call. `fs.lstatSync` builds a Stats object (14 numbers) from the values
 * Node's fs binding leaves in one shared Float64Array; at 20k files that object, its garbage and the path checks are
 * ~10-15 ms of a ~110 ms no-op push. Node's binding (`process.binding("fs")`, on its allow list, not deprecated at
 * run time but for --pending-deprecation) gives the array itself. It is used only when it is there with the expected
 * layout and calls, checked once against `fs.lstatSync` of the same path and on a missing name; otherwise, or at any
 * doubt, `fs.lstatSync` and the same answers. Node built-ins only. */
import * as fs from "node:fs"

/** The fields, by position in `StatRow`. */
export const MODE = 0
export const NLINK = 1
export const INO = 2
export const SIZE = 3
export const MTIME_MS = 4
export const CTIME_MS = 5

/** mode, nlink, ino, size, mtimeMs, ctimeMs of the last `statRow` answer (one array, overwritten by each call). */
export type StatRow = Float64Array

type Values = ArrayLike<number>
interface FsBinding {
  readonly lstat: (path: string, bigint: false, req: undefined, throwIfNoEntry: boolean) => Values | undefined
  readonly stat: (path: string, bigint: false, req: undefined, throwIfNoEntry: boolean) => Values | undefined
}

const row: StatRow = new Float64Array(6)

// Node's layout (lib/internal/fs/utils.js): dev, mode, nlink, uid, gid, rdev, blksize, ino, size, blocks, then
// seconds and nanoseconds of atime, mtime, ctime, birthtime; milliseconds as Node computes them (msFromTimeSpec).
const fromValues = (v: Values): StatRow => {
  row[MODE] = v[1]!
  row[NLINK] = v[2]!
  row[INO] = v[7]!
  row[SIZE] = v[8]!
  row[MTIME_MS] = v[12]! * 1e3 + v[13]! / 1e6
  row[CTIME_MS] = v[14]! * 1e3 + v[15]! / 1e6
  return row
}

const fromStats = (s: fs.Stats): StatRow => {
  row[MODE] = s.mode
  row[NLINK] = s.nlink
  row[INO] = s.ino
  row[SIZE] = s.size
  row[MTIME_MS] = s.mtimeMs
  row[CTIME_MS] = s.ctimeMs
  return row
}

const pendingDeprecation = () =>
  process.execArgv.includes("--pending-deprecation") || (process.env["NODE_OPTIONS"] ?? "").includes("--pending-deprecation") ||
  process.env["NODE_PENDING_DEPRECATION"] === "1"

/** The binding when it answers `path` as fs.lstatSync does, field for field; undefined otherwise. */
const checkedBinding = (path: string): FsBinding | undefined => {
  try {
    if (pendingDeprecation()) return undefined // it would print a warning
    const binding = (process as unknown as { binding: (name: string) => Partial<FsBinding> }).binding("fs")
    if (typeof binding.lstat !== "function" || typeof binding.stat !== "function") return undefined
    const values = binding.lstat(path, false, undefined, true)
    if (values === undefined || typeof values.length !== "number" || values.length < 16) return undefined
    const expected = Array.from(fromStats(fs.lstatSync(path)))
    const got = Array.from(fromValues(values))
    // And a name that is not there is no answer rather than an error (fs's throwIfNoEntry: false).
    const missing = binding.lstat(`.grove-no-such-name-${process.pid}`, false, undefined, false)
    return missing === undefined && got.every((x, i) => x === expected[i]) ? binding as FsBinding : undefined
  } catch {
    return undefined
  }
}

let binding: FsBinding | undefined | null = null

const bindingFor = (path: string) => binding === null ? (binding = checkedBinding(path)) : binding

/** `fs.lstatSync(path)`'s fields (in the shared row), undefined when nothing is there. */
export const lstatRow = (path: string): StatRow | undefined => {
  const b = bindingFor(path)
  if (b === undefined) {
    const s = fs.lstatSync(path, { throwIfNoEntry: false })
    return s === undefined ? undefined : fromStats(s)
  }
  const v = b.lstat(path, false, undefined, false)
  return v === undefined ? undefined : fromValues(v)
}

/** `fs.statSync(path)`'s fields (in the shared row), undefined when nothing is there. */
export const statRow = (path: string): StatRow | undefined => {
  const b = bindingFor(path)
  if (b === undefined) {
    const s = fs.statSync(path, { throwIfNoEntry: false })
    return s === undefined ? undefined : fromStats(s)
  }
  const v = b.stat(path, false, undefined, false)
  return v === undefined ? undefined : fromValues(v)
}

const S_IFMT = 0o170000
export const isDirectory = (r: StatRow): boolean => (r[MODE]! & S_IFMT) === 0o040000
export const isSymbolicLink = (r: StatRow): boolean => (r[MODE]! & S_IFMT) === 0o120000
