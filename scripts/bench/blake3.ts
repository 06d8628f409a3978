/**
 * BLAKE3 throughput of each candidate implementation in one run, with node:crypto
 * sha256 as a baseline. Used to pick the implementation behind @grove/core's objects.
 *
 *   npx node scripts/bench/blake3.ts
 *   BENCH_MODULES_DIR=/tmp/b3bench npx node scripts/bench/blake3.ts   # candidates not installed in the repo
 *
 * Candidates that cannot be resolved are reported as missing rather than failing the run.
 * The native one is the platform package itself: the `@napi-rs/blake-hash` wrapper lists
 * optional packages for every platform, which our registry mirror lacks, breaking `npm ci`.
 */
import { createHash } from "node:crypto"
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"

type Hasher = { readonly update: (data: Uint8Array) => void; readonly digest: () => string }
type Candidate = { readonly name: string; readonly load: () => Promise<() => Hasher> }

const resolveFrom = createRequire(`${process.env["BENCH_MODULES_DIR"] ?? process.cwd()}/`)
const load = async (specifier: string): Promise<Record<string, unknown>> =>
  (await import(pathToFileURL(resolveFrom.resolve(specifier)).href)) as Record<string, unknown>

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")

const candidates: ReadonlyArray<Candidate> = [
  {
    name: "node:crypto sha256 (baseline)",
    load: async () => () => {
      const h = createHash("sha256")
      return { update: (d) => h.update(d), digest: () => h.digest("hex") }
    }
  },
  {
    name: "hash-wasm createBLAKE3 (WASM)",
    load: async () => {
      const mod = await load("hash-wasm")
      const create = mod["createBLAKE3"] as () => Promise<{ init: () => void; update: (d: Uint8Array) => void; digest: () => string }>
      const h = await create() // one instance reused, as a server would
      return () => {
        h.init()
        return { update: (d) => h.update(d), digest: () => h.digest() }
      }
    }
  },
  {
    name: "@noble/hashes blake3 (pure JS)",
    load: async () => {
      const mod = await load("@noble/hashes/blake3.js")
      const blake3 = mod["blake3"] as { create: () => { update: (d: Uint8Array) => void; digest: () => Uint8Array } }
      return () => {
        const h = blake3.create()
        return { update: (d) => h.update(d), digest: () => hex(h.digest()) }
      }
    }
  },
  {
    name: "@napi-rs/blake-hash-linux-x64-gnu (native)",
    load: async () => {
      const mod = resolveFrom("@napi-rs/blake-hash-linux-x64-gnu") as Record<string, unknown> // a .node addon: require only
      const Ctor = mod["Blake3Hasher"] as new () => { update: (d: Uint8Array) => void; digest: (f: string) => string }
      return () => {
        const h = new Ctor()
        return { update: (d) => h.update(d), digest: () => h.digest("hex") }
      }
    }
  }
]

const MiB = 1024 * 1024
const HELLO = "d74981efa70a0c880b8d8c1985d075dbcbf679b99a5f9914e5aaf96b831a9e24"

// Deterministic non-trivial content (xorshift), so no implementation gets an easy input.
const input = (size: number): Uint8Array => {
  const out = new Uint8Array(size)
  let x = 0x9e3779b9
  for (let i = 0; i < size; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = x & 0xff
  }
  return out
}

/** Hashes `data` fed in 1 MiB slices (as a stream would) until ~`budgetMs` elapse; returns MB/s (10^6 bytes). */
const measure = (make: () => Hasher, data: Uint8Array, budgetMs: number): number => {
  const once = () => {
    const h = make()
    for (let off = 0; off < data.length; off += MiB) h.update(data.subarray(off, Math.min(off + MiB, data.length)))
    return h.digest()
  }
  once() // warm-up (JIT, WASM memory growth)
  let bytes = 0
  const start = performance.now()
  let elapsed = 0
  do {
    once()
    bytes += data.length
    elapsed = performance.now() - start
  } while (elapsed < budgetMs)
  return bytes / 1e6 / (elapsed / 1000)
}

const sizes = [MiB, 64 * MiB]
const inputs = sizes.map(input)
const rows: Array<{ name: string; results: Array<number> } | { name: string; missing: string }> = []
for (const candidate of candidates) {
  let make: () => Hasher
  try {
    make = await candidate.load()
  } catch (error) {
    rows.push({ name: candidate.name, missing: error instanceof Error ? error.message.split("\n")[0] ?? "" : String(error) })
    continue
  }
  if (!candidate.name.includes("sha256")) {
    const h = make()
    h.update(new TextEncoder().encode("hello world"))
    const got = h.digest()
    if (got !== HELLO) throw new Error(`${candidate.name}: wrong BLAKE3("hello world"): ${got}`)
  }
  rows.push({ name: candidate.name, results: inputs.map((data) => measure(make, data, 1500)) })
}

const baseline = rows[0] !== undefined && "results" in rows[0] ? rows[0].results : undefined
console.log(`node ${process.version}, ${process.arch}; MB/s = 10^6 bytes/s, one core, 1 MiB updates`)
console.log(["implementation".padEnd(44), ...sizes.map((s) => `${s / MiB} MiB MB/s`.padStart(14)), ...sizes.map((s) => `x sha256 @${s / MiB}M`.padStart(16))].join(""))
for (const row of rows) {
  if ("missing" in row) {
    console.log(`${row.name.padEnd(44)}not installed (${row.missing})`)
    continue
  }
  const ratios = row.results.map((r, i) => (baseline?.[i] ? (r / baseline[i]).toFixed(2) : "-").padStart(16))
  console.log([row.name.padEnd(44), ...row.results.map((r) => r.toFixed(0).padStart(14)), ...ratios].join(""))
}
