/**
 * BLAKE3-256 as the sync protocol writes it: 64 lowercase hex characters.
 *
 * Two backends, chosen by measurement (scripts/bench/blake3.ts): the native Rust build from
 * `@napi-rs/blake-hash-linux-x64-gnu` (~5-7 GB/s on one core), loaded when the platform has it,
 * else hash-wasm (~0.7 GB/s, runs anywhere). The native package is depended on directly, not
 * through `@napi-rs/blake-hash`, whose other-platform packages are missing from our registry
 * mirror and would break `npm ci`.
 */
import { Effect, Schema, Stream } from "effect"
import { checkHash, HASH_PATTERN } from "../Names.ts"
import type { Hash, Hasher } from "./Blake3Backend.ts"
import { backend } from "./Blake3Backend.ts"

export * from "./Blake3Backend.ts"

export { checkHash, HASH_PATTERN }

export const isHash = (value: unknown): value is Hash => typeof value === "string" && HASH_PATTERN.test(value)

/** For JSON boundaries: decoding fails on anything but 64 lowercase hex characters. */
export const HashSchema = Schema.String.pipe(
  Schema.check(Schema.isPattern(HASH_PATTERN, { message: "must be a BLAKE3 hash: 64 lowercase hex characters" }))
)

/** An independent incremental hasher. */
export const makeHasher: Effect.Effect<Hasher> = Effect.promise(() => backend.makeHasher())

/** BLAKE3 of everything a stream emits, without buffering it, plus the byte count. */
export const hashStream = <E, R>(stream: Stream.Stream<Uint8Array, E, R>): Effect.Effect<{ readonly hash: Hash; readonly size: number }, E, R> =>
  Effect.gen(function*() {
    const hasher = yield* makeHasher
    let size = 0
    yield* Stream.runForEach(stream, (chunk) =>
      Effect.sync(() => {
        hasher.update(chunk)
        size += chunk.length
      }))
    return { hash: hasher.digest(), size }
  })
