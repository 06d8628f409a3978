import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, Stream } from "effect"
import { EMPTY_HASH, checkHash, hash, hashStream, HashSchema, isHash, makeHasher } from "./Blake3.ts"

const EMPTY = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
const HELLO = "d74981efa70a0c880b8d8c1985d075dbcbf679b99a5f9914e5aaf96b831a9e24"

describe("Blake3", () => {
  it("matches the protocol's known values", () => {
    expect(hash(new Uint8Array(0))).toBe(EMPTY)
    expect(EMPTY_HASH).toBe(EMPTY)
    expect(hash("hello world")).toBe(HELLO)
    expect(hash(new TextEncoder().encode("hello world"))).toBe(HELLO)
  })

  it.effect("hashes incrementally, independently of how the input is split", () =>
    Effect.gen(function*() {
      const data = new Uint8Array(3 * 1024 * 1024 + 17).map((_, i) => (i * 31) % 251)
      const a = yield* makeHasher
      const b = yield* makeHasher // interleaved with a: each has its own state
      for (let off = 0; off < data.length; off += 65_537) {
        a.update(data.subarray(off, off + 65_537))
        b.update(data.subarray(off, off + 65_537))
      }
      expect(a.digest()).toBe(hash(data))
      expect(b.digest()).toBe(hash(data))

      const streamed = yield* hashStream(Stream.fromIterable([data.subarray(0, 5), data.subarray(5, 1_000_000), data.subarray(1_000_000)]))
      expect(streamed).toEqual({ hash: hash(data), size: data.length })
      expect(yield* hashStream(Stream.empty)).toEqual({ hash: EMPTY, size: 0 })
    }))

  it("accepts only 64 lowercase hex characters", () => {
    expect(isHash(HELLO)).toBe(true)
    expect(checkHash(EMPTY).ok).toBe(true)
    for (const bad of [HELLO.toUpperCase(), HELLO.slice(1), `${HELLO}0`, `${HELLO.slice(0, 63)}g`, `${HELLO}\n`, ` ${HELLO.slice(1)}`, "", 42, null]) {
      expect(isHash(bad), JSON.stringify(bad)).toBe(false)
      expect(checkHash(bad, "x")).toEqual({ ok: false, reason: "x must be 64 lowercase hex characters" })
    }
  })

  it("rejects non-canonical hashes when decoding JSON", () => {
    const decode = Schema.decodeUnknownSync(HashSchema)
    expect(decode(HELLO)).toBe(HELLO)
    expect(() => decode(HELLO.toUpperCase())).toThrow()
    expect(() => decode(`${HELLO}\t`)).toThrow()
  })
})
