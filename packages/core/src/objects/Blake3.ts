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
import { createBLAKE3 } from "hash-wasm"
import { checkHash, HASH_PATTERN } from "../Names.ts"

/** A BLAKE3-256 digest in canonical form. Uppercase, other lengths and separators are never valid. */
export type Hash = string

export { checkHash, HASH_PATTERN }

export const isHash = (value: unknown): value is Hash => typeof value === "string" && HASH_PATTERN.test(value)

/** For JSON boundaries: decoding fails on anything but 64 lowercase hex characters. */
export const HashSchema = Schema.String.pipe(
  Schema.check(Schema.isPattern(HASH_PATTERN, { message: "must be a BLAKE3 hash: 64 lowercase hex characters" }))
)

export interface Hasher {
  readonly update: (data: Uint8Array | string) => void
  /** Final digest; the hasher must not be updated afterwards. */
  readonly digest: () => Hash
}

export interface Backend {
  readonly name: "native" | "wasm"
  /** BLAKE3 of bytes, or of a string's UTF-8 encoding. */
  readonly hash: (data: Uint8Array | string) => Hash
  /** An independent incremental hasher. */
  readonly makeHasher: () => Promise<Hasher>
}

const makeWasmBackend = async (): Promise<Backend> => {
  // One shared instance for one-shot hashing: init/update/digest run synchronously, so calls cannot interleave.
  const shared = await createBLAKE3()
  return {
    name: "wasm",
    hash: (data) => shared.init().update(data).digest("hex"),
    makeHasher: async () => {
      const wasm = await createBLAKE3() // its own WASM instance, so several streams can hash concurrently
      wasm.init()
      return { update: (data) => void wasm.update(data), digest: () => wasm.digest("hex") }
    }
  }
}

let wasmLoading: Promise<Backend> | undefined

/**
 * The WASM backend, created on first call: where the native one loads, a process never pays for instantiating it
 * (~11-15 ms of a one-file push's CPU).
 */
export const loadWasmBackend = (): Promise<Backend> => wasmLoading ??= makeWasmBackend()

/** BLAKE3 of "hello world" and of zero bytes, from the reference implementation. */
const HELLO_WORLD = "d74981efa70a0c880b8d8c1985d075dbcbf679b99a5f9914e5aaf96b831a9e24"
const ZERO_BYTES = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"

interface NativeHasher {
  update(data: Uint8Array | string): NativeHasher
  digest(format: "hex"): string
}

/**
 * The native addon when this platform has it. Loading a `.node` file needs CommonJS `require`,
 * reached through `process.getBuiltinModule` rather than a `node:` import so the module still
 * loads (on WASM) where there is no Node.
 */
const loadNative = (): Backend | undefined => {
  try {
    const nodeModule = globalThis.process?.getBuiltinModule?.("module")
    if (nodeModule === undefined || process.platform !== "linux" || process.arch !== "x64") return undefined
    const addon = nodeModule.createRequire(import.meta.url)("@napi-rs/blake-hash-linux-x64-gnu") as {
      Blake3Hasher: new () => NativeHasher
    }
    const make = (): Hasher => {
      const h = new addon.Blake3Hasher()
      return { update: (data) => void h.update(data), digest: () => h.digest("hex") }
    }
    const backend: Backend = {
      name: "native",
      hash: (data) => new addon.Blake3Hasher().update(data).digest("hex"),
      makeHasher: async () => make()
    }
    // Refuse a binary that does not compute BLAKE3 correctly rather than corrupt the object store (known answers).
    return backend.hash("hello world") === HELLO_WORLD && backend.hash(new Uint8Array(0)) === ZERO_BYTES ? backend : undefined
  } catch {
    return undefined // not installed (other platform, musl) or not loadable: WASM it is
  }
}

export const nativeBackend: Backend | undefined = loadNative()

/** The backend in use: native when available, else WASM (created only then). */
export const backend: Backend = nativeBackend ?? await loadWasmBackend()

/** BLAKE3 of bytes, or of a string's UTF-8 encoding. */
export const hash = (data: Uint8Array | string): Hash => backend.hash(data)

/** Hash of zero bytes; also the hash of the empty tree. */
export const EMPTY_HASH: Hash = hash(new Uint8Array(0))

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
