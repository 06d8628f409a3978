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
import { constants, type Dirent } from "node:fs"
import { access, copyFile, lchown, mkdir, mkdtemp, open, readdir, readlink, rm, symlink } from "node:fs/promises"
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

interface Base {
  /** The base's directory once it is written; rejects when it could not be. */
  readonly ready: Promise<string>
  users: number
}
/** By root, repository and commit; in use order (the last used at the end). */
const bases = new Map<string, Base>()

const evict = () => {
  for (const [key, base] of bases) {
    if (bases.size <= BASES_KEPT) return
    if (base.users > 0) continue
    bases.delete(key)
    void base.ready.then((dir) => rm(dir, { recursive: true, force: true })).catch(() => undefined)
  }
}

/** The base of `commit` under `root`, written now when there is none (or it was removed meanwhile); held until the scope ends. */
const baseOf = (root: string, repo: { readonly id: string; readonly orgId: string }, commit: string) =>
  Effect.gen(function*() {
    const key = `${root}\0${repo.id}\0${commit}`
    let base = bases.get(key)
    if (base !== undefined && !(yield* Effect.promise(() => base!.ready.then((dir) => access(dir).then(() => true), () => false).catch(() => false)))) {
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
        return dir
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
    const dir = yield* Effect.tryPromise({ try: () => held.ready, catch: (cause) => cause })
    evict()
    return dir
  })

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
  const dir = into ?? (yield* Effect.promise(() => mkdtemp(path.join(root, `${label}-`))))
  yield* Effect.tryPromise({
    try: async () => {
      if (user !== undefined) await lchown(dir, user.uid, user.gid)
      await copyTree(base, dir, user)
    },
    catch: (cause) => cause
  }).pipe(Effect.onError(() => remove(dir)))
  return dir
}, Effect.scoped)

export const remove = (dir: string) => Effect.promise(() => rm(dir, { recursive: true, force: true }).catch(() => undefined))
