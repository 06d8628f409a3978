/**
 * The few stat fields the tree checks compare (TreeStatus.columnsChanged, TreeWalk.foldersAsRecorded), for 20,000
 * files in a row without a `fs.Stats` per call. `fs.lstatSync` builds a Stats object (14 numbers) from the values
 * Node's fs binding leaves in one shared Float64Array; at 20k files that object, its garbage and the path checks are
 * ~10-15 ms of a ~110 ms no-op push. Node's binding (`process.binding("fs")`, on its allow list) gives the array
 * itself. It is used only
 * - on the Node major the project pins and tests (another may deprecate it at run time, or change it);
 * - when taking it emits no warning (Node 24 deprecates it under --pending-deprecation; a warning is caught, not
 *   printed, and the binding left alone);
 * - with the expected layout and calls, checked once against `fs.lstatSync` of the same path and on a missing name.
 * Otherwise, or at any doubt, `fs.lstatSync` and the same answers. A path fs would refuse (a NUL byte: the binding
 * would stat the path up to it) always goes to fs. Node built-ins only. */
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

/** The Node major whose binding layout and calls this file was written and tested against (package.json engines). */
export const BINDING_NODE_MAJOR = 24

/** `process.binding("fs")` when taking it emits no warning; a warning it emits is kept from being printed. */
const quietBinding = (): Partial<FsBinding> | undefined => {
  const emitWarning = process.emitWarning
  let warned = false
  process.emitWarning = () => {
    warned = true
  }
  try {
    const binding = (process as unknown as { binding: (name: string) => Partial<FsBinding> }).binding("fs")
    return warned ? undefined : binding
  } finally {
    process.emitWarning = emitWarning
  }
}

/** The binding when it answers `path` as fs.lstatSync does, field for field; undefined otherwise. */
const checkedBinding = (path: string): FsBinding | undefined => {
  try {
    if (Number(process.versions.node.split(".")[0]) !== BINDING_NODE_MAJOR) return undefined
    const binding = quietBinding()
    if (binding === undefined || typeof binding.lstat !== "function" || typeof binding.stat !== "function") {
      return undefined
    }
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

/** The binding, or undefined for fs: also for a path with a NUL byte, which fs refuses (ERR_INVALID_ARG_VALUE). */
const bindingFor = (path: string) =>
  path.includes("\0") ? undefined : binding === null ? (binding = checkedBinding(path)) : binding

/** A reader of `fs.lstatSync` or `fs.statSync`'s fields (in the shared row), undefined when nothing is there. */
const rowReader = (call: "lstat" | "stat") => (path: string): StatRow | undefined => {
  const b = bindingFor(path)
  if (b === undefined) {
    const s = (call === "lstat" ? fs.lstatSync : fs.statSync)(path, { throwIfNoEntry: false })
    return s === undefined ? undefined : fromStats(s)
  }
  const v = b[call](path, false, undefined, false)
  return v === undefined ? undefined : fromValues(v)
}

/** `fs.lstatSync(path)`'s fields (in the shared row), undefined when nothing is there. */
export const lstatRow = rowReader("lstat")

/** `fs.statSync(path)`'s fields (in the shared row), undefined when nothing is there. */
export const statRow = rowReader("stat")

/** The file-type bits of MODE, and a symlink's. */
export const S_IFMT = 0o170000
export const S_IFLNK = 0o120000
export const isDirectory = (r: StatRow): boolean => (r[MODE]! & S_IFMT) === 0o040000
export const isSymbolicLink = (r: StatRow): boolean => (r[MODE]! & S_IFMT) === S_IFLNK
