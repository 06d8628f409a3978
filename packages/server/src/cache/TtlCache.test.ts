/**
 * The read-through cache: a hit within the TTL does not load again, an invalidation forgets, and an
 * answer `keep` refuses (an absence) is loaded again by the next read, as when another node created it;
 * a read after an invalidation never shares a load started before it (that load may predate the change).
 */
import { expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option } from "effect"
import { TtlCache } from "./TtlCache.ts"

const counted = (answers: Array<Option.Option<string>>) => {
  let loads = 0
  return { load: Effect.sync(() => answers[loads++] ?? Option.none()), loads: () => loads }
}

it.effect("reuses a found value within the TTL, and loads again after an invalidation", () =>
  Effect.gen(function*() {
    const cache = new TtlCache<string, Option.Option<string>>(60_000, { keep: Option.isSome })
    const source = counted([Option.some("a"), Option.some("b")])
    expect(yield* cache.get("k", source.load)).toEqual(Option.some("a"))
    expect(yield* cache.get("k", source.load)).toEqual(Option.some("a"))
    expect(source.loads()).toBe(1)
    cache.invalidate("k")
    expect(yield* cache.get("k", source.load)).toEqual(Option.some("b"))
    expect(source.loads()).toBe(2)
  }))

it.effect("does not keep an absence: the next read finds what was created meanwhile", () =>
  Effect.gen(function*() {
    const cache = new TtlCache<string, Option.Option<string>>(60_000, { keep: Option.isSome })
    const source = counted([Option.none(), Option.some("created")])
    expect(yield* cache.get("k", source.load)).toEqual(Option.none())
    expect(yield* cache.get("k", source.load)).toEqual(Option.some("created"))
    expect(yield* cache.get("k", source.load)).toEqual(Option.some("created"))
    expect(source.loads()).toBe(2)
  }))

it.live("a read after an invalidation starts its own load instead of sharing one started before it", () =>
  Effect.gen(function*() {
    const cache = new TtlCache<string, string>(60_000)
    const release = yield* Deferred.make<void>()
    let loads = 0
    // The first load is slow: it read the old value and answers only once released.
    const load = Effect.suspend(() => {
      loads++
      return loads === 1 ? Deferred.await(release).pipe(Effect.as("before")) : Effect.succeed("after")
    })
    const early = yield* Effect.forkChild(cache.get("k", load))
    yield* Effect.yieldNow
    expect(loads).toBe(1)
    cache.invalidateAll()
    // Bounded: sharing the early load would wait for its release, which comes only after this read.
    expect(yield* cache.get("k", load).pipe(Effect.timeoutOption("5 seconds"))).toEqual(Option.some("after"))
    yield* Deferred.succeed(release, undefined)
    expect(yield* Fiber.join(early)).toBe("before")
    // The orphaned load neither replaced the fresh value nor removed anything it did not start.
    expect(yield* cache.get("k", load)).toBe("after")
    expect(loads).toBe(2)
  }))

it.effect("peek answers only what get would answer without loading: a live, unexpired, kept entry", () =>
  Effect.gen(function*() {
    const cache = new TtlCache<string, Option.Option<string>>(60_000, { keep: Option.isSome })
    const source = counted([Option.none(), Option.some("a")])
    expect(cache.peek("k")).toBeUndefined()
    yield* cache.get("k", source.load)
    expect(cache.peek("k")).toBeUndefined()
    yield* cache.get("k", source.load)
    expect(cache.peek("k")?.value).toEqual(Option.some("a"))
    cache.invalidate("k")
    expect(cache.peek("k")).toBeUndefined()
    yield* cache.get("k", source.load)
    cache.setLive(false)
    expect(cache.peek("k")).toBeUndefined()
    const expiring = new TtlCache<string, string>(1)
    yield* expiring.get("k", Effect.succeed("v"))
    // The cache reads the real clock (Date.now), not the test clock.
    yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    expect(expiring.peek("k")).toBeUndefined()
  }))
