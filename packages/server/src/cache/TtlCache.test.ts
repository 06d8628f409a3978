/**
 * The read-through cache: a hit within the TTL does not load again, an invalidation forgets, and an
 * answer `keep` refuses (an absence) is loaded again by the next read, as when another node created it.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
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
