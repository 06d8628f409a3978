/**
 * Built packs on disk, one per main head: `<dir>/<key>.pack` plus `<key>.json` with what the
 * build returned (head id, object count). The JSON is renamed into place last, so its presence
 * means a complete pack; a crash leaves at most a `tmp-*` file, removed at startup. Concurrent
 * requests for one key share one build, which runs detached from the requests so a client that
 * hangs up does not waste it. Beyond `maxEntries` the least recently used packs are deleted
 * (a reader that already opened one keeps reading it: unlink does not cut open files).
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { exportError } from "./ExportError.ts"
import type { ExportError } from "./ExportError.ts"

export interface CachedPack<M> {
  readonly path: string
  readonly meta: M
}

export interface PackCacheOptions {
  /** Directory for the packs, e.g. `<dataDir>/cache/git`; created if missing. */
  readonly dir: string
  /** Packs kept; default 32. */
  readonly maxEntries?: number
}

// Bump when the pack format changes, so packs written by an older server are not served.
const FORMAT = "v1"
const SAFE_KEY = /^[A-Za-z0-9_-]{1,128}$/

const io = <A>(what: string, f: () => Promise<A>): Effect.Effect<A, ExportError> =>
  Effect.tryPromise({ try: f, catch: exportError(what) })

export class PackCache {
  readonly dir: string
  readonly maxEntries: number
  private readonly building = new Map<string, Deferred.Deferred<CachedPack<unknown>, unknown>>()

  private constructor(dir: string, maxEntries: number) {
    this.dir = dir
    this.maxEntries = maxEntries
  }

  /** Opens the cache directory, clearing temp files a crashed build left behind. */
  static make(options: PackCacheOptions): Effect.Effect<PackCache, ExportError> {
    return io(`cannot prepare ${options.dir}`, async () => {
      await fs.promises.mkdir(options.dir, { recursive: true })
      for (const name of await fs.promises.readdir(options.dir)) {
        if (name.startsWith("tmp-")) await fs.promises.rm(path.join(options.dir, name), { force: true })
      }
      return new PackCache(options.dir, Math.max(1, options.maxEntries ?? 32))
    })
  }

  private file(key: string, ext: "pack" | "json"): string {
    return path.join(this.dir, `${FORMAT}-${key}.${ext}`)
  }

  /**
   * The pack for `key` (main's head hash), built by `build` into the temporary path it is given
   * when not cached. `build`'s result must be JSON (it is stored beside the pack).
   */
  getOrBuild<M, E, R>(
    key: string,
    build: (tmpPath: string) => Effect.Effect<M, E, R>
  ): Effect.Effect<CachedPack<M>, E | ExportError, R> {
    return Effect.gen({ self: this }, function*() {
      if (!SAFE_KEY.test(key)) return yield* exportError(`unusable cache key '${key}'`)(undefined)
      const building = this.building.get(key)
      if (building !== undefined) return (yield* Deferred.await(building)) as CachedPack<M>
      const hit = yield* this.lookup<M>(key)
      if (hit !== undefined) return hit
      // checked again: a build may have started while the lookup read the disk
      const pending = this.building.get(key)
      if (pending !== undefined) return (yield* Deferred.await(pending)) as CachedPack<M>
      const deferred = Deferred.makeUnsafe<CachedPack<unknown>, unknown>()
      this.building.set(key, deferred)
      const fiber = yield* Effect.forkDetach(
        this.buildInto(key, build).pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              this.building.delete(key)
              Deferred.doneUnsafe(deferred, exit as Exit.Exit<CachedPack<unknown>, unknown>)
            })
          )
        )
      )
      return yield* Fiber.join(fiber)
    }) as Effect.Effect<CachedPack<M>, E | ExportError, R>
  }

  private lookup<M>(key: string): Effect.Effect<CachedPack<M> | undefined, ExportError> {
    const packPath = this.file(key, "pack")
    const jsonPath = this.file(key, "json")
    return io(`reading cache entry ${key}`, async () => {
      let text: string
      try {
        text = await fs.promises.readFile(jsonPath, "utf8")
        // Touch on use, so eviction drops the least recently used.
        const now = new Date()
        await fs.promises.utimes(jsonPath, now, now)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined
        throw e
      }
      return { path: packPath, meta: JSON.parse(text) as M }
    })
  }

  private buildInto<M, E, R>(key: string, build: (tmpPath: string) => Effect.Effect<M, E, R>) {
    const tmp = path.join(this.dir, `tmp-${key}-${randomBytes(6).toString("hex")}`)
    const packPath = this.file(key, "pack")
    const jsonPath = this.file(key, "json")
    return Effect.gen({ self: this }, function*() {
      const meta = yield* build(`${tmp}.pack`)
      yield* io(`storing cache entry ${key}`, async () => {
        await fs.promises.writeFile(`${tmp}.json`, JSON.stringify(meta))
        await fs.promises.rename(`${tmp}.pack`, packPath)
        await fs.promises.rename(`${tmp}.json`, jsonPath)
      })
      yield* this.evict()
      return { path: packPath, meta }
    }).pipe(
      Effect.onExit((exit) =>
        Exit.isSuccess(exit)
          ? Effect.void
          : Effect.promise(() =>
            Promise.all([fs.promises.rm(`${tmp}.pack`, { force: true }), fs.promises.rm(`${tmp}.json`, { force: true })])
          )
      )
    )
  }

  /** Deletes the least recently used entries beyond maxEntries. */
  private evict(): Effect.Effect<void, ExportError> {
    return io("evicting cached packs", async () => {
      const entries = await Promise.all(
        (await fs.promises.readdir(this.dir))
          .filter((name) => name.endsWith(".json") && !name.startsWith("tmp-"))
          .map(async (name) => {
            const stat = await fs.promises.stat(path.join(this.dir, name)).catch(() => undefined)
            return { name, mtime: stat?.mtimeMs ?? 0 }
          })
      )
      entries.sort((a, b) => b.mtime - a.mtime || a.name.localeCompare(b.name))
      for (const { name } of entries.slice(this.maxEntries)) {
        const base = path.join(this.dir, name.slice(0, -".json".length))
        await fs.promises.rm(`${base}.json`, { force: true })
        await fs.promises.rm(`${base}.pack`, { force: true })
      }
    })
  }
}
