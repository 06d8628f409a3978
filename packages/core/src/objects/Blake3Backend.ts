/**
 * BLAKE3-256 of bytes and strings without Effect (Blake3.ts re-exports it with the Schema and stream forms): for
 * code that runs before Effect loads, such as the client's quick answers (cli NoopPush.ts). Backends: see Blake3.ts.
 */

/** A BLAKE3-256 digest in canonical form. Uppercase, other lengths and separators are never valid. */
export type Hash = string

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
  // Imported here, not at the top: where the native backend loads, a process never reads hash-wasm's ~270 KB (a
  // bundle puts it in a chunk of its own, loaded only then). A bundle hands its CommonJS build over as `default`.
  const loaded: typeof import("hash-wasm") & { readonly default?: typeof import("hash-wasm") } = await import("hash-wasm")
  const { createBLAKE3 } = loaded.default ?? loaded
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
      blake3: (data: Uint8Array | string) => Buffer
    }
    const make = (): Hasher => {
      const h = new addon.Blake3Hasher()
      return { update: (data) => void h.update(data), digest: () => h.digest("hex") }
    }
    const backend: Backend = {
      name: "native",
      // The one-shot call, not a Hasher object (constructed, updated, digested: three calls into the addon): a small
      // input costs ~40% less so (5,000 inputs of ~7.6 KB, a clone's chunks: ~50 -> ~30 ms of CPU).
      hash: (data) => addon.blake3(data).toString("hex"),
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
