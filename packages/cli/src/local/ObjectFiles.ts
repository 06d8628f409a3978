/**
 * The files of the checkout's object store (`.grove/objects/`): where each object lives, and the synchronous
 * reads and removals under the object store (Objects.ts). No Effect here: the small push (SmallPush.ts) reads
 * commits and trees and drops kept blobs with them before the client loads.
 */
import type { ApiSync } from "@grove/api"
import type { TreeEntry } from "@grove/core/objects/TreeText"
import { decodeTree } from "@grove/core/objects/TreeText"
import * as fs from "node:fs"
import * as path from "node:path"
import { isMissing } from "./Files.ts"

type Hash = string

export interface StoredCommit {
  readonly commit: ApiSync.CommitData
  /** Trees this local commit created (to send on push); absent for commits from the server. */
  readonly new_trees?: ReadonlyArray<Hash> | undefined
}

export const groveDir = (root: string): string => path.join(root, ".grove")
/** The last checkout's objects directory, joined once: path.join normalizes the whole path on every call (4 joins per object). */
let lastObjects: { readonly root: string; readonly dir: string } | undefined
export const objectsDir = (root: string): string => {
  if (lastObjects?.root !== root) lastObjects = { root, dir: path.join(groveDir(root), "objects") }
  return lastObjects.dir
}
/** An object's file: the hash is a file name (64 hex characters), appended as path.join would. */
export const treePath = (root: string, hash: Hash): string => `${objectsDir(root)}${path.sep}trees${path.sep}${hash.slice(0, 2)}${path.sep}${hash}`
export const commitsDir = (root: string): string => path.join(objectsDir(root), "commits")
export const commitPath = (root: string, hash: Hash): string => path.join(commitsDir(root), `${hash}.json`)
export const blobPath = (root: string, hash: Hash): string => `${objectsDir(root)}${path.sep}blobs${path.sep}${hash}`
export const tempDir = (root: string): string => path.join(groveDir(root), "tmp")

/** Up to this many kept blobs are removed in the command itself; more go to a detached process. */
const SMALL_DROP = 64

/**
 * A small object file's text, or undefined when missing. Synchronous: trees and commits are a few
 * hundred bytes, and a promise read per object costs a thread-pool round trip each.
 */
export const readObjectText = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch (error) {
    if (isMissing(error)) return undefined
    throw error
  }
}

/** A stored tree's entries; undefined when missing, "damaged" when its text is not a canonical tree. */
export const readTreeFile = (root: string, hash: Hash): ReadonlyArray<TreeEntry> | undefined | "damaged" => {
  const text = readObjectText(treePath(root, hash))
  return text === undefined ? undefined : decodeTree(text) ?? "damaged"
}

export const readCommitFile = (root: string, hash: Hash): StoredCommit | undefined => {
  const text = readObjectText(commitPath(root, hash))
  return text === undefined ? undefined : JSON.parse(text) as StoredCommit
}

/**
 * A commit file's first fields as Objects.ts writes them (`{"commit":{"hash":...`), up to its manifest hash: only
 * null or string values come before it, each taken whole (a string holding `"manifest_hash":` cannot fool it).
 */
const COMMIT_HEAD = /^\{"commit":\{"hash":"([0-9a-f]{64})",(?:"[a-z_]+":(?:null|"(?:[^"\\]|\\.)*"),)*?"manifest_hash":"([0-9a-f]{64})"/

/**
 * A stored commit's manifest (root tree) hash, undefined when the commit is not here. Read from the file's first bytes
 * when they hold it, else from the whole file: a push on top of a commit that added 20,000 files asks only this of it,
 * and its file is ~4 MB of JSON (~25 ms to read and parse).
 */
export const readCommitManifest = (root: string, hash: Hash): Hash | undefined => {
  let fd: number
  try {
    fd = fs.openSync(commitPath(root, hash), "r")
  } catch (error) {
    if (isMissing(error)) return undefined
    throw error
  }
  try {
    const head = Buffer.alloc(1024)
    const match = COMMIT_HEAD.exec(head.toString("utf8", 0, fs.readSync(fd, head, 0, head.length, 0)))
    if (match !== null && match[1] === hash) return match[2]
  } finally {
    fs.closeSync(fd)
  }
  return readCommitFile(root, hash)?.commit.manifest_hash
}

/** The size of the kept copy of a blob (copied at commit time), undefined when none is kept. */
export const keptBlobSize = (root: string, hash: Hash): number | undefined => fs.statSync(blobPath(root, hash), { throwIfNoEntry: false })?.size

export const dropKeptBlob = (root: string, hash: Hash): void => fs.rmSync(blobPath(root, hash), { force: true })

/**
 * How long the detached remover (dropAllKeptBlobs) waits before it unlinks: the command that follows a push (a clone,
 * a script's next step) gets its start without thousands of unlinks beside it. A clone of 5,000 files started right
 * after a push whose remover began at once took 2.1-2.7 s of client CPU in 4 of 8 rounds (0.76-0.92 s in the others
 * and in every round with no remover or this wait; ext4 /tmp, load 9-17).
 */
export const REMOVE_AFTER_MS = 5_000

/**
 * Drops every kept blob. Unlinking 20,000 files takes seconds: the directory is renamed away at once and removed
 * by a detached process that outlives this command (like git's background gc), after REMOVE_AFTER_MS; leftovers go
 * with the next one. Not at a lower priority: a niced remover unlinks all through the next command, and a clone
 * right after a push took twice the CPU then (1.6-4.0 s, every round).
 */
export const dropAllKeptBlobs = (root: string): void => {
  const dir = objectsDir(root)
  const blobs = path.join(dir, "blobs")
  if (!fs.existsSync(blobs)) return
  const trashOf = () => fs.readdirSync(dir).filter((name) => name.startsWith("trash-")).map((name) => path.join(dir, name))
  if (fs.readdirSync(blobs).length <= SMALL_DROP && trashOf().length === 0) {
    // A few files (a one-file push): removing them here costs less than starting a process.
    fs.rmSync(blobs, { recursive: true, force: true })
    return
  }
  fs.renameSync(blobs, path.join(dir, `trash-${process.pid}-${Date.now()}`))
  const trash = trashOf()
  // fs.promises.rm, not fs.rmSync: Node 24's native rmSync stops early, with no error, when another remover (a second
  // push's child sharing the trash, a user's rm -rf .grove) unlinks an entry under it; the promise rm goes on past that.
  const script = "const fs = require('node:fs'); setTimeout(() => { for (const dir of process.argv.slice(1)) fs.promises.rm(dir, " +
    `{ recursive: true, force: true, maxRetries: 3 }).catch(() => {}) }, ${REMOVE_AFTER_MS})`
  // Loaded here, not at start: child_process (and net under it) is start-up time every other command pays.
  const child = process.getBuiltinModule("node:child_process").spawn(process.execPath, ["-e", script, ...trash], { detached: true, stdio: "ignore" })
  child.on("error", () => trash.forEach((trashed) => fs.rmSync(trashed, { recursive: true, force: true })))
  child.unref()
}
