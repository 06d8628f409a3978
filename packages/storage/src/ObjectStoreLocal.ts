/**
 * The object store on the local filesystem (embedded mode). An object lives at
 * `<root>/<namespace>/<hash[0:2]>/<hash[2:4]>/<hash>`. A put writes a temp
 * file under `<root>/.tmp` (same filesystem), fsyncs it and hard-links it into
 * place: `link` is atomic and fails if the name exists, so concurrent puts of
 * one object agree on exactly one creator and nobody sees a partial file.
 */
import { Effect, Layer, Stream } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { readRange, streamObject } from "./ObjectRead.ts"
import { OpenFiles } from "./OpenFiles.ts"
import {
  backendError,
  ObjectNotFound,
  ObjectStore,
  type ObjectKey,
  ObjectStoreError,
  type Operation,
  NAMESPACE_PATTERN,
  namespaceError,
  validateKey,
  validateNamespace
} from "./ObjectStore.ts"

export interface ObjectStoreLocalOptions {
  /** The directory holding every object; created when missing. */
  readonly root: string
}

const READ_CHUNK = 256 * 1024
/** Temp files older than this at start are leftovers of a crash. */
const STALE_TEMP_MS = 60 * 60 * 1000

/** A put's link that found its fan-out directory removed by a concurrent delete is tried this many times. */
const LINK_ATTEMPTS = 8

/** Removes `dir` if empty; fails (ENOTEMPTY, ENOENT) otherwise, which stops the caller's climb. */
const removeEmpty = (dir: string) => fs.rmdir(dir)

const errnoCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

/** The store and its kept-open pack files, which `layer` closes at shutdown. */
const makeWithFiles = Effect.fn("ObjectStoreLocal.make")(function*(options: ObjectStoreLocalOptions) {
  const root = path.resolve(options.root)
  const tmpDir = path.join(root, ".tmp")
  yield* Effect.tryPromise({
    try: () => fs.mkdir(tmpDir, { recursive: true }),
    catch: (cause) =>
      new ObjectStoreError({ operation: "put", reason: "Backend", message: `cannot create ${tmpDir}`, cause })
  })
  yield* removeStaleTemps(tmpDir)

  const objectPath = (key: ObjectKey) =>
    path.join(root, key.namespace, key.hash.slice(0, 2), key.hash.slice(2, 4), key.hash)

  const attempt = <A>(operation: Operation, key: ObjectKey, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: (cause) => backendError(operation, key, cause) })

  /** The object's size, or undefined when it does not exist. */
  const stat = (operation: Operation, key: ObjectKey) =>
    Effect.tryPromise({
      try: () => fs.stat(objectPath(key)).then((s) => s.size, (error: unknown) => {
        if (errnoCode(error) === "ENOENT") return undefined
        throw error
      }),
      catch: (cause) => backendError(operation, key, cause)
    })

  const put = <E, R>(
    rawKey: ObjectKey,
    body: Stream.Stream<Uint8Array, E, R>
  ): Effect.Effect<{ size: number; created: boolean }, ObjectStoreError | E, R> =>
    Effect.gen(function*() {
      const key = yield* validateKey("put", rawKey)
      const existing = yield* stat("put", key)
      if (existing !== undefined) return { size: existing, created: false }

      const tmp = path.join(tmpDir, `${key.hash}.${randomBytes(8).toString("hex")}`)
      // Whatever happens (failure, interruption, success), the temp name goes away.
      yield* Effect.addFinalizer(() => Effect.promise(() => fs.rm(tmp, { force: true }).catch(() => undefined)))
      const file = yield* Effect.acquireRelease(
        attempt("put", key, () => fs.open(tmp, "wx", 0o644)),
        (handle) => Effect.promise(() => handle.close().catch(() => undefined))
      )
      let size = 0
      yield* Stream.runForEach(body, (chunk) =>
        attempt("put", key, async () => {
          let offset = 0
          while (offset < chunk.byteLength) {
            const { bytesWritten } = await file.write(chunk, offset, chunk.byteLength - offset)
            offset += bytesWritten
          }
          size += chunk.byteLength
        }))
      yield* attempt("put", key, () => file.sync())

      const target = objectPath(key)
      const created = yield* attempt("put", key, async () => {
        // A delete may remove a fan-out directory (it emptied it) within the mkdir or before the link: made again then.
        for (let attempt = 1; ; attempt++) {
          try {
            await fs.mkdir(path.dirname(target), { recursive: true })
            await fs.link(tmp, target)
            break
          } catch (error) {
            if (errnoCode(error) === "EEXIST") return false
            if (errnoCode(error) !== "ENOENT" || attempt === LINK_ATTEMPTS) throw error
          }
        }
        // A delete of this very key (gc sweeping an object uploaded again) may unlink what was just linked and remove
        // the directory it emptied before it is synced: the object went as it would by a delete right after the put.
        await syncDirectory(path.dirname(target)).catch((error: unknown) => {
          if (errnoCode(error) !== "ENOENT") throw error
        })
        return true
      })
      if (created) return { size, created }
      const stored = yield* stat("put", key)
      return { size: stored ?? size, created: false }
    }).pipe(Effect.scoped, Effect.withSpan("ObjectStoreLocal.put"))

  const isNotFound = (cause: unknown) => errnoCode(cause) === "ENOENT"

  const get = (rawKey: ObjectKey): Stream.Stream<Uint8Array, ObjectStoreError | ObjectNotFound> =>
    streamObject(rawKey, {
      acquire: (key) => fs.open(objectPath(key), "r"),
      release: (handle) => handle.close(),
      // An open descriptor keeps reading the whole object even if it is deleted meanwhile.
      body: async (handle) => handle.createReadStream({ highWaterMark: READ_CHUNK, autoClose: false }) as AsyncIterable<Uint8Array>,
      isNotFound
    })

  // A clone reads a pack in many spans: its descriptor stays open between them.
  const openFiles = new OpenFiles()

  const getRange = Effect.fn("ObjectStoreLocal.getRange")(function*(rawKey: ObjectKey, offset: number, length: number) {
    return yield* readRange(rawKey, length, (key) => openFiles.readRange(objectPath(key), offset, length), isNotFound)
  })

  const has = Effect.fn("ObjectStoreLocal.has")(function*(rawKey: ObjectKey) {
    const key = yield* validateKey("has", rawKey)
    return (yield* stat("has", key)) !== undefined
  })

  const size = Effect.fn("ObjectStoreLocal.size")(function*(rawKey: ObjectKey) {
    const key = yield* validateKey("size", rawKey)
    const bytes = yield* stat("size", key)
    if (bytes === undefined) return yield* new ObjectNotFound({ namespace: key.namespace, hash: key.hash })
    return bytes
  })

  const remove = Effect.fn("ObjectStoreLocal.delete")(function*(rawKey: ObjectKey) {
    const key = yield* validateKey("delete", rawKey)
    const file = objectPath(key)
    yield* attempt("delete", key, () => fs.rm(file, { force: true }))
    // The fan-out directories it emptied go too (a gc that empties a namespace leaves none): rmdir removes only an
    // empty one, so a put's object is never lost; a put that finds its directory gone makes it again.
    yield* Effect.promise(() => removeEmpty(path.dirname(file)).then(() => removeEmpty(path.dirname(path.dirname(file)))).catch(() => undefined))
    // After the unlink, so a descriptor opened meanwhile is dropped too: the space is freed and new reads miss.
    openFiles.forget(file)
  })

  const namespaces = Effect.tryPromise({
    try: async () =>
      (await fs.readdir(root, { withFileTypes: true })).filter((e) => e.isDirectory() && NAMESPACE_PATTERN.test(e.name)).map((e) => e.name),
    catch: (cause) => namespaceError("list", "", cause)
  })

  const deleteNamespace = Effect.fn("ObjectStoreLocal.deleteNamespace")(function*(rawNamespace: string) {
    const namespace = yield* validateNamespace(rawNamespace)
    const dir = path.join(root, namespace)
    return yield* Effect.tryPromise({
      try: async () => {
        const files = (await fs.readdir(dir, { recursive: true, withFileTypes: true }).catch((error: unknown) => {
          if (errnoCode(error) === "ENOENT") return []
          throw error
        })).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name))
        await fs.rm(dir, { recursive: true, force: true })
        for (const file of files) openFiles.forget(file)
        return files.length
      },
      catch: (cause) => namespaceError("delete", namespace, cause)
    })
  })

  return { store: ObjectStore.of({ put, get, getRange, has, size, delete: remove, namespaces, deleteNamespace }), openFiles }
})

export const make = (options: ObjectStoreLocalOptions): Effect.Effect<ObjectStore["Service"], ObjectStoreError> =>
  Effect.map(makeWithFiles(options), ({ store }) => store)

/** Makes a new directory entry durable. */
const syncDirectory = async (dir: string) => {
  const handle = await fs.open(dir, "r")
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

const removeStaleTemps = (tmpDir: string) =>
  Effect.promise(async () => {
    const now = Date.now()
    const names = await fs.readdir(tmpDir).catch(() => [])
    for (const name of names) {
      const file = path.join(tmpDir, name)
      const info = await fs.stat(file).catch(() => undefined)
      if (info !== undefined && now - info.mtimeMs > STALE_TEMP_MS) await fs.rm(file, { force: true }).catch(() => {})
    }
  })

export const layer = (options: ObjectStoreLocalOptions): Layer.Layer<ObjectStore, ObjectStoreError> =>
  Layer.effect(
    ObjectStore,
    Effect.gen(function*() {
      const { store, openFiles } = yield* makeWithFiles(options)
      yield* Effect.addFinalizer(() => Effect.sync(() => openFiles.closeAll()))
      return store
    })
  )
