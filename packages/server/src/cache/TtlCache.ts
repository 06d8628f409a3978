/**
 * A small read-through cache with a time-to-live, for the hot read path
 * (tokens, repositories, roles). Whoever caches access data invalidates it on
 * the database's change notifications (`AccessCaches`); the TTL only bounds
 * memory and the damage of a change nobody notified. Concurrent misses for one
 * key share a single load. `keep` can refuse to cache some answers: an absence,
 * which nothing invalidates when a row is inserted. While not live (the change
 * notifications are not being received) every read loads.
 */
import { Deferred, Effect, Exit, Option } from "effect"

interface Entry<V> {
  readonly value: V
  readonly expires: number
}

export class TtlCache<K, V> {
  private readonly entries = new Map<K, Entry<V>>()
  private readonly loading = new Map<K, Deferred.Deferred<V, unknown>>()
  /** Bumped by every invalidation, so a load that started before one is not cached after it. */
  private generation = 0
  private live = true
  private readonly ttlMs: number
  private readonly maxEntries: number
  private readonly keep: (value: V) => boolean

  constructor(ttlMs: number, options: { readonly maxEntries?: number; readonly keep?: (value: V) => boolean } = {}) {
    this.ttlMs = ttlMs
    this.maxEntries = options.maxEntries ?? 50_000
    this.keep = options.keep ?? (() => true)
  }

  get<E, R>(key: K, load: Effect.Effect<V, E, R>): Effect.Effect<V, E, R> {
    if (!this.live) return load
    const hit = this.entries.get(key)
    if (hit !== undefined && hit.expires > Date.now()) return Effect.succeed(hit.value)
    const pending = this.loading.get(key)
    if (pending !== undefined) return Deferred.await(pending) as Effect.Effect<V, E>
    return Effect.suspend(() => {
      const deferred = Deferred.makeUnsafe<V, unknown>()
      const started = this.generation
      this.loading.set(key, deferred)
      return load.pipe(
        Effect.onExit((exit) =>
          Effect.sync(() => {
            // A load an invalidation orphaned must not remove the one started after it.
            if (this.loading.get(key) === deferred) this.loading.delete(key)
            if (Exit.isSuccess(exit) && started === this.generation && this.keep(exit.value)) this.set(key, exit.value)
            Deferred.doneUnsafe(deferred, exit)
          })
        )
      )
    })
  }

  /**
   * The cached answer for `key` without loading: `{ value }` on a live, unexpired hit, else undefined.
   * For the synchronous fast reads (fast-reads/), which fall back to `get` on undefined.
   */
  peek(key: K): { readonly value: V } | undefined {
    if (!this.live) return undefined
    const hit = this.entries.get(key)
    return hit !== undefined && hit.expires > Date.now() ? hit : undefined
  }

  private set(key: K, value: V) {
    if (this.entries.size >= this.maxEntries) this.entries.clear()
    this.entries.set(key, { value, expires: Date.now() + this.ttlMs })
  }

  /**
   * Forgets `key`. A load already under way still answers its own callers, but a read after this
   * starts a fresh one: it may have read the database before the change being invalidated for.
   */
  invalidate(key: K): void {
    this.generation++
    this.entries.delete(key)
    this.loading.delete(key)
  }

  invalidateAll(): void {
    this.generation++
    this.entries.clear()
    this.loading.clear()
  }

  /** Forgets every entry whose value `matches` (and, like `invalidate`, keeps no load under way). */
  invalidateWhere(matches: (value: V) => boolean): void {
    this.generation++
    for (const [key, entry] of this.entries) if (matches(entry.value)) this.entries.delete(key)
    this.loading.clear()
  }

  /** Stops caching (`false`: every read loads, nothing is kept) or starts again; either way forgets all. */
  setLive(live: boolean): void {
    this.invalidateAll()
    this.live = live
  }
}

/** Of a cache of lookups (`Option`s), the row cached as found for `key`; undefined when absent, not cached or not live. */
export const peekFound = <K, A>(cache: TtlCache<K, Option.Option<A>>, key: K): A | undefined => {
  const hit = cache.peek(key)
  return hit !== undefined && Option.isSome(hit.value) ? hit.value.value : undefined
}
