/**
 * A job's working directory: a fresh directory under the CI work root holding the files of the
 * run's commit (all of them: path permissions do not apply inside CI), owned by the job's own
 * host user (Sandbox.jobUser), bound into the job's sandboxes alone, and removed afterwards. Files are created exclusively (never through an existing
 * symlink); names were checked when they were pushed.
 *
 * The files come from a base: the commit written once from the store into `<root>/.bases` (root's
 * own, 0700: no run reaches it) and kept for the next runs of the same commit. Each job gets its own
 * copy of it (copy-on-write clones where the filesystem has them), each entry created with the job's
 * owner as it is copied, so no step ever sees the base or another run's changes.
 */
import { Effect, Stream } from "effect"
import { constants, copyFileSync, type Dirent, existsSync, lchownSync, mkdirSync, mkdtempSync, opendirSync, rmSync, symlinkSync } from "node:fs"
import { copyFile, lchown, lstat, mkdir, mkdtemp, open, readdir, readlink, rm, symlink } from "node:fs/promises"
import * as path from "node:path"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { storedSnapshot } from "../content/StoredSnapshot.ts"
import type { RunUser } from "./Sandbox.ts"


/** Creates the work root, traversable (not listable) by the run user. */
export const prepareRoot = (root: string) => Effect.promise(() => mkdir(root, { recursive: true, mode: 0o711 }).then(() => undefined))

/** Writes the tree of `commit` from the store into `dir` (which exists). */
const writeTree = Effect.fnUntraced(function*(dir: string, repo: { readonly id: string; readonly orgId: string }, commit: string) {
  const objects = yield* ContentObjects
  const chunks = yield* ChunkStore
  const row = (yield* objects.loadCommitHeaders(repo.id, [commit])).get(commit)
  if (row === undefined) return yield* Effect.fail(new Error(`commit ${commit} is not stored`))
  const source = storedSnapshot(repo.orgId, objects, chunks)
  const write = (hash: string, into: string): Effect.Effect<void, unknown> =>
    Effect.gen(function*() {
      for (const entry of yield* source.readTree(hash)) {
        const target = path.join(into, entry.name)
        if (entry.kind === "tree") {
          yield* Effect.promise(() => mkdir(target))
          yield* write(entry.hash, target)
        } else if (entry.mode === "symlink") {
          const parts: Array<Uint8Array> = []
          yield* Stream.runForEach(source.readBlob(entry.hash), (part) => Effect.sync(() => parts.push(part)))
          yield* Effect.promise(() => symlink(Buffer.concat(parts).toString("utf8"), target))
        } else {
          const file = yield* Effect.promise(() => open(target, "wx", entry.mode === "executable" ? 0o755 : 0o644))
          yield* Stream.runForEach(source.readBlob(entry.hash), (part) => Effect.promise(() => file.write(part).then(() => undefined))).pipe(
            Effect.ensuring(Effect.promise(() => file.close()))
          )
        }
      }
    })
  yield* write(row.manifest_hash, dir)
})

/** How many commits' bases a node keeps (the least recently used unused one goes first). */
export const BASES_KEPT = 8

/** A written base: its directory, and when it is small (SMALL_*), its entries in creation order. */
interface Written {
  readonly dir: string
  readonly small: ReadonlyArray<Entry> | undefined
}

/** A base entry, by its path under the base; a symlink with its target. */
type Entry = { readonly path: string; readonly kind: "dir" | "file" } | { readonly path: string; readonly kind: "symlink"; readonly target: string }

/**
 * A base this small is copied in one go on the calling thread (three files: 0.1-0.5 ms of CPU), not one awaited
 * file-system call after another: on a loaded machine each of those waits for a thread-pool turn, and a
 * three-file checkout took 12-90 ms at load 15 (bench:ci's no-op run).
 */
const SMALL_ENTRIES = 32
const SMALL_BYTES = 256 * 1024

interface Base {
  /** The base once it is written; rejects when it could not be. */
  readonly ready: Promise<Written>
  users: number
}
/** By root, repository and commit; in use order (the last used at the end). */
const bases = new Map<string, Base>()

const evict = () => {
  for (const [key, base] of bases) {
    if (bases.size <= BASES_KEPT) return
    if (base.users > 0) continue
    bases.delete(key)
    void base.ready.then(({ dir }) => rm(dir, { recursive: true, force: true })).catch(() => undefined)
  }
}

/** The base of `commit` under `root`, written now when there is none (or it was removed meanwhile); held until the scope ends. */
const baseOf = (root: string, repo: { readonly id: string; readonly orgId: string }, commit: string) =>
  Effect.gen(function*() {
    const key = `${root}\0${repo.id}\0${commit}`
    let base = bases.get(key)
    // Removed meanwhile (by hand): written again. A stat, on this thread (no thread-pool turn to wait for).
    if (base !== undefined && !(yield* Effect.promise(() => base!.ready.then(({ dir }) => existsSync(dir), () => false)))) {
      if (bases.get(key) === base) bases.delete(key)
      // Another job may have started a new one meanwhile.
      base = bases.get(key)
    }
    if (base === undefined) {
      const parent = path.join(root, ".bases")
      const services = yield* Effect.context<ContentObjects | ChunkStore>()
      // A directory of its own (never one an eviction is still removing); copied from only once `ready` settles.
      const ready = Effect.gen(function*() {
        yield* Effect.promise(() => mkdir(parent, { recursive: true, mode: 0o700 }))
        const dir = yield* Effect.promise(() => mkdtemp(path.join(parent, `${repo.id}-${commit}-`)))
        yield* writeTree(dir, repo, commit).pipe(Effect.onError(() => remove(dir)))
        // Listed once (a walk of the base): a small one is then copied in one go.
        return { dir, small: yield* Effect.promise(() => smallListing(dir).catch(() => undefined)) }
      }).pipe(Effect.provideContext(services), Effect.runPromise)
      const fresh: Base = { ready, users: 0 }
      base = fresh
      bases.set(key, fresh)
      void ready.catch(() => bases.get(key) === fresh && bases.delete(key))
    }
    const held = base
    bases.delete(key)
    bases.set(key, held)
    held.users++
    yield* Effect.addFinalizer(() => Effect.sync(() => {
      held.users--
      evict()
    }))
    const written = yield* Effect.tryPromise({ try: () => held.ready, catch: (cause) => cause })
    evict()
    return written
  })

/** The entries of the base at `dir`, parents first, when it has at most SMALL_ENTRIES of at most SMALL_BYTES in all. */
const smallListing = async (dir: string): Promise<ReadonlyArray<Entry> | undefined> => {
  const out: Array<Entry> = []
  let bytes = 0
  const walk = async (relative: string): Promise<boolean> => {
    for (const entry of await readdir(path.join(dir, relative), { withFileTypes: true })) {
      const at = path.join(relative, entry.name)
      if (out.length >= SMALL_ENTRIES) return false
      if (entry.isDirectory()) {
        out.push({ path: at, kind: "dir" })
        if (!(await walk(at))) return false
      } else if (entry.isSymbolicLink()) out.push({ path: at, kind: "symlink", target: await readlink(path.join(dir, at)) })
      else {
        bytes += (await lstat(path.join(dir, at))).size
        if (bytes > SMALL_BYTES) return false
        out.push({ path: at, kind: "file" })
      }
    }
    return true
  }
  return await walk("") ? out : undefined
}

/** copyTree of a small base (its listing), synchronously: the same entries, modes and owners. */
const copySmall = (from: string, entries: ReadonlyArray<Entry>, into: string, user: RunUser | undefined): void => {
  for (const entry of entries) {
    const target = path.join(into, entry.path)
    if (entry.kind === "dir") mkdirSync(target, { mode: 0o755 })
    else if (entry.kind === "symlink") symlinkSync(entry.target, target)
    else copyFileSync(path.join(from, entry.path), target, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE)
    if (user !== undefined) lchownSync(target, user.uid, user.gid)
  }
}

/** Copies `from` into the existing `into`, every entry created as `user` (as root: lchown as it is made). */
const copyTree = async (from: string, into: string, user: RunUser | undefined): Promise<void> => {
  const own = (target: string) => user === undefined ? Promise.resolve() : lchown(target, user.uid, user.gid)
  const entries: Array<Dirent> = await readdir(from, { withFileTypes: true })
  await Promise.all(entries.map(async (entry) => {
    const source = path.join(from, entry.name)
    const target = path.join(into, entry.name)
    if (entry.isDirectory()) {
      await mkdir(target, { mode: 0o755 })
      await own(target)
      await copyTree(source, target, user)
    } else if (entry.isSymbolicLink()) {
      await symlink(await readlink(source), target)
      await own(target)
    } else {
      // Cloned where the filesystem can (copy-on-write), else copied; never through an existing name.
      await copyFile(source, target, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE)
      // (copyFile keeps the mode: an executable stays one.)
      await own(target)
    }
  }))
}

/**
 * A new directory holding the tree of `commit`, owned by `user`; answers its path. `into`: an empty
 * directory of the job's already there (a warm sandbox's, already `user`'s), written into instead.
 */
export const checkout = Effect.fnUntraced(function*(
  root: string,
  label: string,
  repo: { readonly id: string; readonly orgId: string },
  commit: string,
  user: RunUser | undefined,
  into?: string
) {
  const base = yield* baseOf(root, repo, commit)
  // On this thread, as a small base's copy: one system call, not a wait for a thread-pool turn.
  const dir = into ?? (yield* Effect.sync(() => mkdtempSync(path.join(root, `${label}-`))))
  const small = base.small
  yield* (small !== undefined
    ? Effect.try({
      try: () => {
        if (user !== undefined) lchownSync(dir, user.uid, user.gid)
        copySmall(base.dir, small, dir, user)
      },
      catch: (cause) => cause
    })
    : Effect.tryPromise({
      try: async () => {
        if (user !== undefined) await lchown(dir, user.uid, user.gid)
        await copyTree(base.dir, dir, user)
      },
      catch: (cause) => cause
    })).pipe(Effect.onError(() => remove(dir)))
  return dir
}, Effect.scoped)

/**
 * Removes a directory. A small one (at most SMALL_ENTRIES entries: a no-op job's workspace) goes in one go on this
 * thread, as a small checkout is copied: fs.rm's recursive walk is an awaited thread-pool call per entry (0.5-1.1 ms
 * of CPU for a seven-entry workspace, 0.2-0.3 ms so, counted first). A larger one, or one that could not be removed
 * so (a step's process still writing in it), is removed as before.
 */
export const remove = (dir: string) =>
  Effect.promise(() => {
    try {
      if (fewEntries(dir)) {
        rmSync(dir, { recursive: true, force: true })
        return Promise.resolve()
      }
    } catch {
      // As before, below.
    }
    return rm(dir, { recursive: true, force: true }).catch(() => undefined)
  })

/**
 * Whether `dir` holds at most SMALL_ENTRIES entries, symlinks not followed. A directory is read a few entries at a
 * time (opendir), so a huge one costs no more than the first SMALL_ENTRIES + 1.
 */
const fewEntries = (dir: string): boolean => {
  let count = 0
  const pending = [dir]
  while (pending.length > 0) {
    const handle = opendirSync(pending.pop()!)
    try {
      for (let entry = handle.readSync(); entry !== null; entry = handle.readSync()) {
        if (++count > SMALL_ENTRIES) return false
        if (entry.isDirectory()) pending.push(path.join(entry.parentPath, entry.name))
      }
    } finally {
      handle.closeSync()
    }
  }
  return true
}
