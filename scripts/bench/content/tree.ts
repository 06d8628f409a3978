/**
 * The benchmark's working tree: a deterministic (seeded) set of nested
 * directories holding mostly small text files, mid-size binaries and one
 * 50 MiB incompressible binary. Generated once into ~/.cache/grove and reused;
 * a manifest (path, size, sha256, executable bit) sits next to it so clones
 * can be checked file by file.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export const MIB = 1024 * 1024

export interface TreeSpec {
  readonly files: number
  readonly totalBytes: number
  readonly bigBytes: number
  readonly seed: number
}

export const FULL_SPEC: TreeSpec = { files: 20_000, totalBytes: 200 * MIB, bigBytes: 50 * MIB, seed: 0x5eed_2024 }
/** For trying the script out quickly (`--small`). */
export const SMALL_SPEC: TreeSpec = { files: 2_000, totalBytes: 20 * MIB, bigBytes: 12 * MIB, seed: 0x5eed_2024 }

export interface ManifestEntry {
  readonly path: string
  readonly size: number
  readonly sha256: string
  readonly executable: boolean
}

export interface Manifest {
  readonly spec: TreeSpec
  readonly totalBytes: number
  readonly bigFile: string
  /** A small text file and how it is edited for the one-file push. */
  readonly smallFiles: ReadonlyArray<string>
  readonly entries: ReadonlyArray<ManifestEntry>
}

export interface Tree {
  readonly dir: string
  readonly manifest: Manifest
}

/** sfc32: small, fast, good enough for benchmark data, and the same everywhere. */
const prng = (seed: number) => {
  let a = 0x9e3779b9 ^ seed, b = 0x243f6a88, c = 0xb7e15162, d = 1
  const next = () => {
    a |= 0; b |= 0; c |= 0; d |= 0
    const t = (((a + b) | 0) + d) | 0
    d = (d + 1) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    c = (c + t) | 0
    return t >>> 0
  }
  for (let i = 0; i < 16; i++) next()
  const float = () => next() / 4294967296
  return {
    u32: next,
    float,
    int: (n: number) => Math.floor(float() * n),
    pick: <A>(items: ReadonlyArray<A>): A => items[Math.floor(float() * items.length)]!,
    /** Log-normal with the given median and sigma (Box–Muller). */
    logNormal: (median: number, sigma: number) => {
      const u = Math.max(float(), 1e-12)
      const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * float())
      return median * Math.exp(sigma * z)
    },
    bytes: (n: number, mask = 0xff) => {
      const words = new Uint32Array(Math.ceil(n / 4))
      for (let i = 0; i < words.length; i++) words[i] = next()
      const out = new Uint8Array(words.buffer, 0, n)
      if (mask !== 0xff) for (let i = 0; i < n; i++) out[i] = out[i]! & mask
      return out
    }
  }
}
type Rng = ReturnType<typeof prng>

const WORDS = (
  "alpha beta gamma delta index value state buffer stream chunk tree commit branch merge parse render layout " +
  "config server client request response handler router session token cache queue worker result error option " +
  "user group member owner repo file path name size offset length hash digest count total limit page cursor " +
  "event topic partition record schema field table column query filter select insert update delete create " +
  "read write open close start stop init load save sync fetch push pull clone apply reduce map flat scan fold"
).split(" ")
const TOP = ["src", "lib", "docs", "assets", "test", "tools", "vendor", "packages", "config", "scripts", "web", "data"]
const TEXT_EXT = ["ts", "ts", "ts", "js", "md", "json", "txt", "c", "h", "py", "css", "html", "yaml", "go", "rs"]
const BIN_EXT = ["png", "png", "jpg", "jpg", "woff2", "pdf", "bin", "dat", "zip", "ico", "wasm"]

const textContent = (rng: Rng, size: number): Buffer => {
  let out = ""
  let depth = 0
  while (out.length < size) {
    const words = 2 + rng.int(9)
    let line = "  ".repeat(depth)
    for (let i = 0; i < words; i++) line += (i === 0 ? "" : rng.float() < 0.2 ? "." : " ") + rng.pick(WORDS)
    const r = rng.float()
    if (r < 0.12 && depth < 6) { line += " {"; depth++ }
    else if (r < 0.24 && depth > 0) { line += " }"; depth-- }
    else if (r < 0.3) line += ` = ${rng.int(100_000)};`
    else line += ";"
    out += line + "\n"
  }
  return Buffer.from(out.slice(0, size), "latin1")
}

const binaryContent = (rng: Rng, size: number): Uint8Array =>
  // Most media is already compressed; some (raw assets, wasm) compresses about in half.
  rng.float() < 0.7 ? rng.bytes(size) : rng.bytes(size, 0x0f)

interface Planned {
  readonly path: string
  size: number
  readonly kind: "text" | "binary"
  readonly executable: boolean
}

const plan = (spec: TreeSpec, rng: Rng): { files: Array<Planned>; big: string; small: Array<string> } => {
  // Directories: grow a random tree from the top-level folders, at most 7 deep.
  const dirs: Array<{ path: string; depth: number }> = TOP.map((t) => ({ path: t, depth: 1 }))
  const dirCount = Math.max(TOP.length, Math.round(spec.files / 16))
  const taken = new Set(dirs.map((d) => d.path))
  while (dirs.length < dirCount) {
    const parent = dirs[rng.int(dirs.length)]!
    if (parent.depth >= 7) continue
    const child = `${parent.path}/${rng.pick(WORDS)}${rng.float() < 0.3 ? `-${rng.pick(WORDS)}` : ""}`
    if (taken.has(child)) continue
    taken.add(child)
    dirs.push({ path: child, depth: parent.depth + 1 })
  }
  const names = new Set<string>()
  const fileName = (ext: string) => {
    for (;;) {
      // Skewed towards the first directories (big folders next to small ones).
      const dir = dirs[Math.floor(dirs.length * rng.float() ** 1.6)]!.path
      const name = `${dir}/${rng.pick(WORDS)}${rng.float() < 0.6 ? `_${rng.pick(WORDS)}` : ""}${rng.int(100)}.${ext}`
      if (!names.has(name)) { names.add(name); return name }
    }
  }
  const files: Array<Planned> = []
  const big = "assets/media/intro-video.bin"
  names.add(big)
  const others = spec.files - 1
  const binaries = Math.round(others * 0.2)
  for (let i = 0; i < others; i++) {
    if (i < binaries) {
      const size = Math.round(Math.min(8 * MIB, Math.max(100, rng.logNormal(8 * 1024, 1.5))))
      files.push({ path: fileName(rng.pick(BIN_EXT)), size, kind: "binary", executable: false })
    } else {
      const executable = rng.float() < 0.002
      const size = Math.round(Math.min(400 * 1024, Math.max(40, rng.logNormal(2.5 * 1024, 1.0))))
      files.push({ path: fileName(executable ? "sh" : rng.pick(TEXT_EXT)), size, kind: "text", executable })
    }
  }
  // Scale to the wanted total (the big file aside).
  const sum = files.reduce((s, f) => s + f.size, 0)
  const factor = (spec.totalBytes - spec.bigBytes) / sum
  for (const f of files) f.size = Math.max(1, Math.round(f.size * factor))
  files.push({ path: big, size: spec.bigBytes, kind: "binary", executable: false })
  const small = files.filter((f) => f.kind === "text" && !f.executable && f.size > 200 && f.size < 4096).slice(0, 8).map((f) => f.path)
  return { files, big, small }
}

const sha256 = (data: Uint8Array) => createHash("sha256").update(data).digest("hex")

const generate = (dir: string, spec: TreeSpec): Manifest => {
  const rng = prng(spec.seed)
  const { big, files, small } = plan(spec, rng)
  const entries: Array<ManifestEntry> = []
  const made = new Set<string>()
  for (const file of files) {
    const data = file.path === big ? rng.bytes(file.size) : file.kind === "text" ? textContent(rng, file.size) : binaryContent(rng, file.size)
    const full = path.join(dir, file.path)
    const parent = path.dirname(full)
    if (!made.has(parent)) { fs.mkdirSync(parent, { recursive: true }); made.add(parent) }
    fs.writeFileSync(full, data, { mode: file.executable ? 0o755 : 0o644 })
    entries.push({ path: file.path, size: data.length, sha256: sha256(data), executable: file.executable })
  }
  entries.sort((a, b) => (a.path < b.path ? -1 : 1))
  return { spec, totalBytes: entries.reduce((s, e) => s + e.size, 0), bigFile: big, smallFiles: small, entries }
}

/** The cached tree for `spec`, generated (into a temp dir, then renamed) when missing. */
export const ensureTree = (spec: TreeSpec, log: (line: string) => void): Tree => {
  const cache = path.join(os.homedir(), ".cache", "grove")
  const full = (Object.keys(FULL_SPEC) as Array<keyof TreeSpec>).every((k) => spec[k] === FULL_SPEC[k])
  const name = full ? "bench-tree-v1" : `bench-tree-v1-${spec.files}-${spec.totalBytes}`
  const dir = path.join(cache, name)
  const manifestFile = `${dir}.manifest.json`
  if (fs.existsSync(dir) && fs.existsSync(manifestFile)) {
    return { dir, manifest: JSON.parse(fs.readFileSync(manifestFile, "utf8")) as Manifest }
  }
  log(`generating ${spec.files} files (${(spec.totalBytes / MIB).toFixed(0)} MiB) into ${dir} ...`)
  const started = performance.now()
  fs.mkdirSync(cache, { recursive: true })
  fs.rmSync(dir, { recursive: true, force: true })
  const staging = fs.mkdtempSync(`${dir}.tmp-`)
  try {
    const manifest = generate(staging, spec)
    fs.renameSync(staging, dir)
    fs.writeFileSync(manifestFile, JSON.stringify(manifest))
    log(`generated in ${((performance.now() - started) / 1000).toFixed(1)} s`)
    return { dir, manifest }
  } catch (error) {
    fs.rmSync(staging, { recursive: true, force: true })
    throw error
  }
}

const walk = (root: string, rel: string, out: Array<string>) => {
  for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
    const child = rel === "" ? entry.name : `${rel}/${entry.name}`
    if (rel === "" && (entry.name === ".grove" || entry.name === ".git")) continue
    if (entry.isDirectory()) walk(root, child, out)
    else out.push(child)
  }
}

/** Differences between `dir` and the manifest (content, executable bit, missing and extra files); empty when equal. */
export const compareTree = (dir: string, entries: ReadonlyArray<ManifestEntry>): Array<string> => {
  const problems: Array<string> = []
  const found: Array<string> = []
  walk(dir, "", found)
  const present = new Set(found)
  const expected = new Set(entries.map((e) => e.path))
  for (const f of found) if (!expected.has(f)) problems.push(`extra file ${f}`)
  for (const e of entries) {
    if (!present.has(e.path)) { problems.push(`missing ${e.path}`); continue }
    const full = path.join(dir, e.path)
    const data = fs.readFileSync(full)
    if (data.length !== e.size || sha256(data) !== e.sha256) problems.push(`content differs: ${e.path}`)
    const executable = (fs.statSync(full).mode & 0o111) !== 0
    if (executable !== e.executable) problems.push(`executable bit differs: ${e.path}`)
    if (problems.length > 20) break
  }
  return problems
}
