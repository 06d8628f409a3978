/**
 * The checkout's object store under `.grove/objects/`: trees (canonical text,
 * named by hash), commits (the wire `CommitData` as JSON, plus the trees a
 * local commit created) and blobs of local commits that are not pushed yet
 * (copied at commit time, so later edits cannot change what gets pushed).
 * Cloned blobs are not kept: their bytes live in the working tree and on the
 * server.
 */
import { Objects } from "@grove/core"
import { Effect } from "effect"
import * as fsSync from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { CliFailure, failure } from "../Failures.ts"
import { hashFile } from "./Hashing.ts"
import { errorMessage, io, writeAtomic, writeJsonAtomic } from "./Io.ts"
import type { ObjectReader } from "../sync/Outgoing.ts"
import type { StoredCommit } from "./ObjectFiles.ts"
import {
  blobPath,
  commitPath,
  commitsDir,
  dropAllKeptBlobs,
  dropKeptBlob,
  groveDir,
  keptBlobSize,
  readCommitFile,
  readTreeFile,
  tempDir,
  treePath
} from "./ObjectFiles.ts"

type TreeEntry = Objects.Tree.TreeEntry
type Hash = string

export type { StoredCommit }
export { blobPath, commitPath, commitsDir, groveDir, tempDir, treePath }

/** One checkout's objects, with a per-process cache of trees. */
export interface ObjectStore {
  readonly root: string
  /** The same objects read synchronously, for what a push sends (sync/Outgoing.ts); failures are thrown `CliFailure`s. */
  readonly reader: ObjectReader
  readonly readTree: (hash: Hash) => Effect.Effect<ReadonlyArray<TreeEntry> | undefined, CliFailure>
  /** Stores a tree; true when it was new here. */
  readonly writeTree: (hash: Hash, entries: ReadonlyArray<TreeEntry>) => Effect.Effect<boolean, CliFailure>
  /**
   * Stores many trees (a clone's or a pull's): each checked against its hash, the new ones written one after another.
   * `fresh`: the store is a new checkout's (a clone's), which holds no tree yet and whose folder is no checkout until
   * the clone ends (its config.json is written last): each tree goes straight to its file, no existence check, temp
   * file or rename.
   */
  readonly writeTrees: (
    list: ReadonlyArray<{ readonly hash: Hash; readonly entries: ReadonlyArray<TreeEntry> }>,
    fresh?: boolean
  ) => Effect.Effect<void, CliFailure>
  readonly hasTree: (hash: Hash) => Effect.Effect<boolean, CliFailure>
  readonly readCommit: (hash: Hash) => Effect.Effect<StoredCommit | undefined, CliFailure>
  readonly writeCommit: (stored: StoredCommit) => Effect.Effect<void, CliFailure>
  /** Every file of a root tree, loading trees as needed; fails when one is missing. */
  readonly snapshot: (root: Hash) => Effect.Effect<Objects.FileChanges.Snapshot, CliFailure>
  /** Copies a file's bytes into the blob store; false (and nothing kept) when the copy does not hash to `hash`. */
  readonly keepBlob: (hash: Hash, source: string) => Effect.Effect<boolean, CliFailure>
  readonly keepBlobBytes: (hash: Hash, bytes: Uint8Array) => Effect.Effect<void, CliFailure>
  readonly hasBlob: (hash: Hash) => Effect.Effect<boolean, CliFailure>
  readonly dropBlob: (hash: Hash) => Effect.Effect<void, CliFailure>
  /** Drops every kept blob (no branch has unpushed commits that need one). */
  readonly dropAllBlobs: Effect.Effect<void, CliFailure>
}

/** A sync read of the object files as an Effect: a thrown `CliFailure` stays itself, any other error says `what`. */
const readSync = <A>(what: string, read: () => A): Effect.Effect<A, CliFailure> =>
  Effect.try({ try: read, catch: (error) => error instanceof CliFailure ? error : failure(`${what}: ${errorMessage(error)}`, "local_io") })

/** A tree's canonical text, or undefined when it does not hash to `hash`. */
const canonicalText = (hash: Hash, entries: ReadonlyArray<TreeEntry>): string | undefined => {
  const text = Objects.Tree.encodeTree(entries)
  return Objects.Blake3.hash(text) === hash ? text : undefined
}

const badTree = (hash: Hash) => failure(`tree ${hash} does not hash to its name`, "bad_object")

/** A tree's canonical text, once it is known to hash to `hash`. */
const treeText = (hash: Hash, entries: ReadonlyArray<TreeEntry>): Effect.Effect<string, CliFailure> => {
  const text = canonicalText(hash, entries)
  return text === undefined ? badTree(hash) : Effect.succeed(text)
}

export const openObjects = (root: string): ObjectStore => {
  const trees = new Map<Hash, ReadonlyArray<TreeEntry>>()
  const madeDirs = new Set<string>()
  /** Writes a small object through a temp file renamed into place, synchronously (a clone stores thousands of trees). */
  const makeDirOf = (file: string) => {
    const dir = path.dirname(file)
    if (!madeDirs.has(dir)) {
      fsSync.mkdirSync(dir, { recursive: true })
      madeDirs.add(dir)
    }
  }
  const writeSmallFile = (file: string, text: string): void => {
    makeDirOf(file)
    const temp = `${file}.${process.pid}.tmp`
    try {
      fsSync.writeFileSync(temp, text)
      fsSync.renameSync(temp, file)
    } catch (error) {
      fsSync.rmSync(temp, { force: true })
      throw error
    }
  }
  const writeSmall = (what: string, file: string, text: string): Effect.Effect<void, CliFailure> =>
    Effect.try({ try: () => writeSmallFile(file, text), catch: (error) => failure(`${what}: ${errorMessage(error)}`, "local_io") })
  const readTreeSync = (hash: Hash): ReadonlyArray<TreeEntry> | undefined => {
    const cached = trees.get(hash)
    if (cached !== undefined) return cached
    if (hash === Objects.Blake3.EMPTY_HASH) return []
    const entries = readTreeFile(root, hash)
    if (entries === undefined) return undefined
    if (entries === "damaged") throw failure(`tree ${hash} in the object store is damaged`, "bad_object")
    trees.set(hash, entries)
    return entries
  }
  const readTree = (hash: Hash) => readSync(`cannot read tree ${hash}`, () => readTreeSync(hash))
  const hasTree = (hash: Hash) =>
    trees.has(hash) ? Effect.succeed(true) : Effect.sync(() => fsSync.existsSync(treePath(root, hash)))
  return {
    root,
    reader: {
      root,
      readTree: (hash) => {
        try {
          return readTreeSync(hash)
        } catch (error) {
          throw error instanceof CliFailure ? error : failure(`cannot read tree ${hash}: ${errorMessage(error)}`, "local_io")
        }
      },
      readCommit: (hash) => {
        try {
          return readCommitFile(root, hash)
        } catch (error) {
          throw failure(`cannot read commit ${hash}: ${errorMessage(error)}`, "local_io")
        }
      },
      keptBlobSize: (hash) => keptBlobSize(root, hash)
    },
    readTree,
    hasTree,
    writeTree: (hash, entries) =>
      Effect.gen(function*() {
        if (yield* hasTree(hash)) return false
        const text = yield* treeText(hash, entries)
        yield* writeSmall(`cannot write tree ${hash}`, treePath(root, hash), text)
        trees.set(hash, entries)
        return true
      }),
    // Synchronously, one tree after another (a clone writes hundreds while its files download): a promise write
    // per tree costs thread-pool round trips and competes with the download's own writes. One loop, not an Effect per
    // tree: a clone's 315 trees cost ~33 -> ~20 ms of CPU so.
    writeTrees: (list, fresh = false) => {
      let at: Hash | undefined
      return Effect.try({
        try: () => {
          for (const { entries, hash } of list) {
            at = hash
            const file = treePath(root, hash)
            if (trees.has(hash) || (!fresh && fsSync.existsSync(file))) continue
            const text = canonicalText(hash, entries)
            if (text === undefined) throw badTree(hash)
            if (fresh) {
              // "wx": a tree file already there is an error, never overwritten.
              makeDirOf(file)
              fsSync.writeFileSync(file, text, { flag: "wx" })
            } else writeSmallFile(file, text)
            trees.set(hash, entries)
          }
        },
        catch: (error) => error instanceof CliFailure ? error : failure(`cannot write tree ${at}: ${errorMessage(error)}`, "local_io")
      })
    },
    readCommit: (hash) => readSync(`cannot read commit ${hash}`, () => readCommitFile(root, hash)),
    writeCommit: (stored) => io(`cannot write commit ${stored.commit.hash}`, () => writeJsonAtomic(commitPath(root, stored.commit.hash), stored)),
    snapshot: (rootTree) =>
      Effect.gen(function*() {
        // Load every reachable tree first (flattenTree's lookup is synchronous).
        const pending = [rootTree]
        const loaded = new Map<Hash, ReadonlyArray<TreeEntry>>()
        for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
          if (loaded.has(next)) continue
          const entries = yield* readTree(next)
          if (entries === undefined) return yield* failure(`tree ${next} is missing from the checkout (run grove pull)`, "missing_object")
          loaded.set(next, entries)
          for (const entry of entries) if (entry.kind === "tree") pending.push(entry.hash)
        }
        const flat = Objects.FileChanges.flattenTree(rootTree, (h) => loaded.get(h))
        if (!flat.ok) return yield* failure(flat.reason, "missing_object")
        return flat.files
      }),
    keepBlob: (hash, source) =>
      io(`cannot keep a copy of ${source}`, async () => {
        const target = blobPath(root, hash)
        if (await fs.access(target).then(() => true, () => false)) return true
        await fs.mkdir(path.dirname(target), { recursive: true })
        const temp = `${target}.${process.pid}.tmp`
        await fs.copyFile(source, temp, fs.constants.COPYFILE_FICLONE)
        // The copy is what gets pushed: it must be the bytes that were hashed.
        if ((await hashFile(temp)) !== hash) {
          await fs.rm(temp, { force: true })
          return false
        }
        await fs.rename(temp, target)
        return true
      }),
    keepBlobBytes: (hash, bytes) =>
      io(`cannot keep blob ${hash}`, async () => {
        const target = blobPath(root, hash)
        if (await fs.access(target).then(() => true, () => false)) return
        await writeAtomic(target, bytes)
      }),
    hasBlob: (hash) => Effect.sync(() => fsSync.existsSync(blobPath(root, hash))),
    dropAllBlobs: Effect.try({
      try: () => dropAllKeptBlobs(root),
      catch: (error) => failure(`cannot remove kept blobs: ${errorMessage(error)}`, "local_io")
    }),
    // Synchronous: a first push drops thousands of kept blobs, and a promise per unlink costs a thread-pool round trip each.
    dropBlob: (hash) =>
      Effect.try({
        try: () => dropKeptBlob(root, hash),
        catch: (error) => failure(`cannot remove blob ${hash}: ${errorMessage(error)}`, "local_io")
      })
  }
}
