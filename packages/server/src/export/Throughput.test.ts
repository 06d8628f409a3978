/** Throughput of the exporters on ~100 MiB, and their memory on a blob produced on the fly. */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { hashTree } from "@grove/core/objects/Tree"
import type { TreeEntry } from "@grove/core/objects/Tree"
import { buildPack } from "./GitPack.ts"
import { MemorySnapshotSource } from "./MemorySnapshotSource.ts"
import type { MemoryNode } from "./MemorySnapshotSource.ts"
import type { SnapshotSource } from "./SnapshotSource.ts"
import { run, tempDir, writeStream } from "./TestTools.ts"
import { zipSnapshot } from "./Zip.ts"

const MiB = 1024 * 1024
const rate = (bytes: number, ms: number) => `${(bytes / MiB / (ms / 1000)).toFixed(0)} MiB/s`

/** ~100 MiB: 2000 source-like files of ~30 KiB, 16 text files of 1.5 MiB, 4 random 8 MiB files. */
const corpus = () => {
  const source = new MemorySnapshotSource(256 * 1024)
  const line = (i: number) => `export function f${i}(x: number): number { return x * ${i} + ${i % 7} } // ${"·".repeat(i % 40)}\n`
  const text = (seed: number, size: number) => {
    const parts: Array<string> = []
    let n = 0
    for (let i = seed; n < size; i++) {
      const l = line(i)
      parts.push(l)
      n += l.length
    }
    return Buffer.from(parts.join("")).subarray(0, size)
  }
  const root: Record<string, MemoryNode> = {}
  let total = 0
  for (let d = 0; d < 20; d++) {
    const files: Record<string, MemoryNode> = {}
    for (let f = 0; f < 100; f++) {
      const content = text(d * 1000 + f * 37, 30 * 1024)
      files[`file${f}.ts`] = { file: content }
      total += content.length
    }
    root[`pkg${d}`] = { dir: files }
  }
  for (let i = 0; i < 16; i++) {
    const content = text(i * 10_000, 1.5 * MiB)
    root[`text${i}.txt`] = { file: content }
    total += content.length
  }
  for (let i = 0; i < 4; i++) {
    const content = randomBytes(8 * MiB)
    root[`media${i}.bin`] = { file: content }
    total += content.length
  }
  return { source, tree: source.addTree(root), total }
}

/** One blob of `size` bytes made chunk by chunk as it is read, so any copy of it would show in memory. */
const generatedSource = (size: number): { source: SnapshotSource<never>; tree: string } => {
  const pattern = Buffer.from(Array.from({ length: 20_000 }, (_, i) => `line ${i} of a large generated file\n`).join(""))
  const blob = "b".repeat(64)
  const entries: Array<TreeEntry> = [{ name: "large.txt", kind: "blob", hash: blob, mode: "regular" }]
  const tree = hashTree(entries)
  const chunk = 256 * 1024
  return {
    tree,
    source: {
      readTree: () => Effect.succeed(entries),
      blobSize: () => Effect.succeed(size),
      readBlob: () =>
        Stream.fromIterable((function*() {
          for (let at = 0; at < size; at += chunk) {
            const out = Buffer.allocUnsafe(Math.min(chunk, size - at))
            for (let i = 0; i < out.length; i++) out[i] = pattern[(at + i) % pattern.length]!
            sample()
            yield out
          }
        })(), { chunkSize: 1 })
    }
  }
}

// A full GC before each sample, so the figure is what is still reachable, not garbage awaiting collection.
v8.setFlagsFromString("--expose-gc")
const gc = vm.runInNewContext("gc") as () => void
let low = Infinity
let high = 0
let samples = 0
const sample = () => {
  if (samples++ % 8 !== 0) return
  gc()
  const m = process.memoryUsage()
  low = Math.min(low, m.heapUsed + m.arrayBuffers)
  high = Math.max(high, m.heapUsed + m.arrayBuffers)
}
/** Growth of live memory across the samples taken since the last call. */
const growth = () => {
  gc()
  const g = high - low
  low = Infinity
  high = 0
  samples = 0
  return g
}

describe("export throughput and memory", () => {
  it.live("holds no whole file in memory: a 96 MiB blob packs and zips with a few MiB of buffers", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const size = 96 * MiB
      const { source, tree } = generatedSource(size)
      const history = [{ hash: "h".repeat(64), parent_hash: null, manifest_hash: tree, author: "a", message: null, timestamp: "2026-01-01T00:00:00Z" }]
      growth()
      yield* buildPack(source, history, path.join(dir, "big.pack"))
      const packGrowth = growth()
      yield* writeStream(zipSnapshot(source, tree), path.join(dir, "big.zip"))
      const zipGrowth = growth()
      console.log(`memory growth while streaming 96 MiB: pack ${(packGrowth / MiB).toFixed(1)} MiB, zip ${(zipGrowth / MiB).toFixed(1)} MiB`)
      assert.isBelow(packGrowth, 16 * MiB)
      assert.isBelow(zipGrowth, 16 * MiB)
      const out = path.join(dir, "out")
      yield* run("unzip", ["-q", path.join(dir, "big.zip"), "-d", out])
      assert.strictEqual((yield* Effect.promise(() => fs.promises.stat(path.join(out, "large.txt")))).size, size)
    }).pipe(Effect.scoped), 120_000)

  it.live("packs and zips ~100 MiB, reporting MiB/s", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const { source, tree, total } = corpus()
      const history = [{ hash: "h".repeat(64), parent_hash: null, manifest_hash: tree, author: "bench", message: "bench", timestamp: "2026-01-01T00:00:00Z" }]
      let started = performance.now()
      const pack = yield* buildPack(source, history, path.join(dir, "bench.pack"))
      const packMs = performance.now() - started
      const packSize = (yield* Effect.promise(() => fs.promises.stat(pack.packPath))).size
      started = performance.now()
      const zipSize = yield* writeStream(zipSnapshot(source, tree), path.join(dir, "bench.zip"))
      const zipMs = performance.now() - started
      console.log(
        `content ${(total / MiB).toFixed(1)} MiB in ${pack.objectCount - 1} objects\n` +
          `pack: ${packMs.toFixed(0)} ms, ${rate(total, packMs)}, ${(packSize / MiB).toFixed(1)} MiB\n` +
          `zip:  ${zipMs.toFixed(0)} ms, ${rate(total, zipMs)}, ${(zipSize / MiB).toFixed(1)} MiB`
      )
      yield* run("unzip", ["-tq", path.join(dir, "bench.zip")])
      yield* run("git", ["init", "-q", "--bare", "r.git"], { cwd: dir })
      yield* run("git", ["index-pack", "--strict", "-o", path.join(dir, "bench.idx"), pack.packPath], { cwd: path.join(dir, "r.git") })
      // compressible text deflates, random media is stored: well under the input, not above it
      assert.isBelow(packSize, total * 0.5)
      assert.isBelow(zipSize, total * 0.5)
    }).pipe(Effect.scoped), 120_000)
})
