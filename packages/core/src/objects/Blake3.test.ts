import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, Stream } from "effect"
import { execFileSync } from "node:child_process"
import { backend, EMPTY_HASH, checkHash, hash, hashStream, HashSchema, isHash, loadWasmBackend, makeHasher, nativeBackend } from "./Blake3.ts"

const wasmBackend = await loadWasmBackend()

const EMPTY = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
const HELLO = "d74981efa70a0c880b8d8c1985d075dbcbf679b99a5f9914e5aaf96b831a9e24"

const glibcX64 = process.platform === "linux" && process.arch === "x64" &&
  (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime !== undefined

describe("Blake3", () => {
  it("uses the native backend where its package exists (linux x64 glibc), WASM elsewhere", () => {
    expect(nativeBackend !== undefined).toBe(glibcX64)
    expect(backend.name).toBe(glibcX64 ? "native" : "wasm")
  })

  // A fresh node loads the module, counting WASM compilations and noting whether hash-wasm's code was loaded at all;
  // ARCH=arm64 makes the native package unavailable.
  const loadAlone = (env: Record<string, string>) => {
    const script = `let compiled = 0
let hashWasm = false
;(await import("node:module")).registerHooks({ load: (url, context, next) => ((hashWasm ||= url.includes("hash-wasm")), next(url, context)) })
for (const k of ["instantiate", "compile"]) { const f = WebAssembly[k]; WebAssembly[k] = (...a) => (compiled++, f(...a)) }
if (process.env.ARCH) Object.defineProperty(process, "arch", { value: process.env.ARCH })
const m = await import(process.argv[1])
const data = new Uint8Array(1024 * 1024 + 5).map((_, i) => (i * 7) % 253)
console.log(JSON.stringify({ name: m.backend.name, compiled, hashWasm, empty: m.EMPTY_HASH, hello: m.hash("hello world"), data: m.hash(data) }))`
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script, new URL("./Blake3.ts", import.meta.url).pathname], {
      env: { ...process.env, ...env },
      encoding: "utf8"
    })
    return JSON.parse(out) as { name: string; compiled: number; hashWasm: boolean; empty: string; hello: string; data: string }
  }
  const MIB = wasmBackend.hash(new Uint8Array(1024 * 1024 + 5).map((_, i) => (i * 7) % 253))

  it.skipIf(!glibcX64)("creates no WASM instance, and loads no hash-wasm code, when the native backend loads", () => {
    expect(loadAlone({})).toEqual({ name: "native", compiled: 0, hashWasm: false, empty: EMPTY, hello: HELLO, data: MIB })
  })

  it("falls back to WASM, byte-exact, where the native package cannot load", () => {
    const loaded = loadAlone({ ARCH: "arm64" })
    expect(loaded).toMatchObject({ name: "wasm", hashWasm: true, empty: EMPTY, hello: HELLO, data: MIB })
    expect(loaded.compiled).toBeGreaterThan(0)
  })

  it("matches the protocol's known values", () => {
    expect(hash(new Uint8Array(0))).toBe(EMPTY)
    expect(EMPTY_HASH).toBe(EMPTY)
    expect(hash("hello world")).toBe(HELLO)
    expect(hash(new TextEncoder().encode("hello world"))).toBe(HELLO)
  })

  for (const b of [wasmBackend, nativeBackend]) {
    if (b === undefined) continue
    it.effect(`${b.name} backend: known values, UTF-8 strings, incremental = one-shot`, () =>
      Effect.gen(function*() {
        expect(b.hash(new Uint8Array(0))).toBe(EMPTY)
        expect(b.hash("hello world")).toBe(HELLO)
        expect(b.hash("naïve \u{1F600}")).toBe(b.hash(new TextEncoder().encode("naïve \u{1F600}")))
        const data = new Uint8Array(5 * 1024 * 1024 + 3).map((_, i) => (i * 7) % 253)
        const h = yield* Effect.promise(() => b.makeHasher())
        for (let off = 0; off < data.length; off += 1_000_003) h.update(data.subarray(off, off + 1_000_003))
        expect(h.digest()).toBe(b.hash(data))
        expect(b.hash(data)).toBe(wasmBackend.hash(data))
      }))
  }

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

describe.skipIf(!glibcX64)("Blake3, native backend's one-shot hash", () => {
  // The addon's Hasher object, as the incremental hasher (and, before, the one-shot hash) used it.
  const addon = process.getBuiltinModule("module").createRequire(import.meta.url)("@napi-rs/blake-hash-linux-x64-gnu") as {
    Blake3Hasher: new () => { update(data: Uint8Array | string): { digest(format: "hex"): string } }
  }
  const viaHasher = (data: Uint8Array | string) => new addon.Blake3Hasher().update(data).digest("hex")

  it("gives the Hasher's and WASM's digests for any size, views at any offset and UTF-8 strings", () => {
    const pool = new Uint8Array(300_000).map((_, i) => (i * 131 + (i >> 7)) % 256)
    const inputs: Array<Uint8Array | string> = ["", "hello world", "naïve \u{1F600} ✓", "x".repeat(70_000)]
    for (let size = 0; size < 40_000; size += 997) inputs.push(pool.subarray(size % 13, size % 13 + size))
    inputs.push(pool.subarray(3, 262_147), new Uint8Array(pool.buffer, 1, 1025))
    for (const input of inputs) {
      expect(nativeBackend!.hash(input)).toBe(viaHasher(input))
      expect(nativeBackend!.hash(input)).toBe(wasmBackend.hash(input))
    }
  })

  it("makes no Hasher object per input: one call into the addon (a small input costs ~40-60% less CPU so)", () => {
    // A clone verifies thousands of small chunks and trees; the Hasher's construct, update and digest were the one-shot
    // hash until this (5,000 inputs of 0.3-2.3 KB, in turns: one-shot 0.5-0.6x the Hasher's CPU).
    const original = addon.Blake3Hasher
    let made = 0
    addon.Blake3Hasher = new Proxy(original, {
      construct: (target, args) => {
        made++
        return Reflect.construct(target, args)
      }
    })
    try {
      const data = new Uint8Array(8000).fill(7)
      expect(nativeBackend!.hash(data)).toBe(wasmBackend.hash(data))
      expect(nativeBackend!.hash("hello world")).toBe(HELLO)
      expect(made).toBe(0)
    } finally {
      addon.Blake3Hasher = original
    }
  })
})
