/**
 * BLAKE3-256 as the sync protocol writes it: 64 lowercase hex characters.
 *
 * Backed by hash-wasm (WASM, no per-platform packages, so `npm ci` works on our registry
 * mirror); see scripts/bench/blake3.ts for why it was chosen over the alternatives.
 */
import { Effect, Schema, Stream } from "effect"
import { createBLAKE3 } from "hash-wasm"
import type { NameCheck } from "../Names.ts"

/** A BLAKE3-256 digest in canonical form. Uppercase, other lengths and separators are never valid. */
export type Hash = string

export const HASH_PATTERN = /^[0-9a-f]{64}$/

export const isHash = (value: unknown): value is Hash => typeof value === "string" && HASH_PATTERN.test(value)

export const checkHash = (value: unknown, what = "hash"): NameCheck =>
  isHash(value) ? { ok: true } : { ok: false, reason: `${what} must be 64 lowercase hex characters` }

/** For JSON boundaries: decoding fails on anything but 64 lowercase hex characters. */
export const HashSchema = Schema.String.pipe(
  Schema.check(Schema.isPattern(HASH_PATTERN, { message: "must be a BLAKE3 hash: 64 lowercase hex characters" }))
)

// One shared instance for one-shot hashing: init/update/digest run synchronously, so calls cannot interleave.
const shared = await createBLAKE3()

/** BLAKE3 of bytes, or of a string's UTF-8 encoding. */
export const hash = (data: Uint8Array | string): Hash => shared.init().update(data).digest("hex")

/** Hash of zero bytes; also the hash of the empty tree. */
export const EMPTY_HASH: Hash = hash(new Uint8Array(0))

export interface Hasher {
  readonly update: (data: Uint8Array | string) => void
  /** Final digest; the hasher must not be updated afterwards. */
  readonly digest: () => Hash
}

/** An independent incremental hasher (its own WASM instance, so several streams can hash concurrently). */
export const makeHasher: Effect.Effect<Hasher> = Effect.map(Effect.promise(() => createBLAKE3()), (wasm) => {
  wasm.init()
  return {
    update: (data) => void wasm.update(data),
    digest: () => wasm.digest("hex")
  }
})

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
