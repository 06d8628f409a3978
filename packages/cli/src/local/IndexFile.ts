/**
 * The working-tree index file (`.grove/index.json`): where it is, and reading it (the last one read kept until this
 * process writes one; its head alone when only the base is wanted). Its entries are IndexEntries.ts, its layouts
 * IndexLayout.ts, both re-exported here. Node built-ins only (see TreeStatus.ts).
 */
import type { Stats } from "node:fs"
import * as fs from "node:fs"
import * as path from "node:path"
import type { WorkIndex } from "./IndexEntries.ts"
import { EMPTY_INDEX } from "./IndexEntries.ts"
import { parseIndexBytes } from "./IndexLayout.ts"

export * from "./IndexEntries.ts"
export * from "./IndexLayout.ts"

export const indexPath = (root: string): string => path.join(root, ".grove", "index.json")

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
    const index = parseIndexBytes(fs.readFileSync(fd), stats.mtimeMs)
    if (index !== EMPTY_INDEX) fileKeys.set(index, key)
    lastRead = { key, index }
    return index
  } finally {
    fs.closeSync(fd)
  }
}
