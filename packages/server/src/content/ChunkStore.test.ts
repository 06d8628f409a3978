/**
 * ChunkStore.putMany against a migrated in-memory database (PGlite) and a local object store: entries
 * marked `verified` (bare-frame uploads: the hash was just taken from those plain bytes) are stored without
 * being hashed again, and plain bytes that begin with the zstd magic are kept as they are; unmarked
 * entries are still verified (each one hashed, a wrong hash rejected).
 */
import { describe, expect, it, layer } from "@effect/vitest"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Frames from "@grove/core/objects/Frames"
import { DbEmbedded, Migrations, ObjectStore, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { Effect, Layer, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes, randomUUID } from "node:crypto"
import { zstdCompressSync } from "node:zlib"
import { asArrived, ChunkStore, INLINE_MAX, namespaceOf, packBytes } from "./ChunkStore.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Live = ChunkStore.layer.pipe(
  Layer.provideMerge(ObjectStoreLocal.layer({ root: tempDirectory("grove-chunkstore-") }).pipe(Layer.orDie)),
  Layer.provideMerge(Db)
)

const MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd])

/** Runs `effect`, recording every buffer the BLAKE3 backend hashes meanwhile. */
const hashedDuring = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const backend = Blake3.backend as { hash: (data: Uint8Array | string) => string }
    const original = backend.hash
    const seen: Array<Uint8Array | string> = []
    backend.hash = (data) => (seen.push(data), original(data))
    const result = yield* effect.pipe(Effect.ensuring(Effect.sync(() => (backend.hash = original))))
    return { result, seen }
  })

/** Chunks of fresh bytes; two begin with the zstd magic (a real zstd stream, and the magic then noise). */
const freshChunks = () => {
  const datas = [
    new Uint8Array(zstdCompressSync(randomBytes(5000))),
    new Uint8Array(Buffer.concat([MAGIC, randomBytes(3000)])),
    ...Array.from({ length: 18 }, (_, i) => new Uint8Array(randomBytes(1000 + i)))
  ]
  return datas.map((data) => ({ hash: Blake3.hash(data), data }))
}

layer(Live, { timeout: 60_000 })("ChunkStore.putMany", (it) => {
  it.effect("verified entries are stored without a second hash, magic-prefixed plain bytes as they are; others are verified", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const chunks = yield* ChunkStore
      const orgId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "o1", name: "o1" })}`

      const bare = freshChunks()
      const { seen } = yield* hashedDuring(chunks.putMany(orgId, bare.map((c) => ({ ...c, verified: true as const }))))
      // At most the pack object's own name; none of the chunks' bytes (nor a decompression of them) again.
      expect(seen.filter((d) => bare.some((c) => c.data === d))).toEqual([])
      expect(seen.length).toBeLessThanOrEqual(1)
      for (const c of bare) {
        const stored = Buffer.concat([...(yield* Stream.runCollect(chunks.read(orgId, c.hash)))])
        expect(stored.equals(Buffer.from(c.data))).toBe(true)
      }

      // Hashed frames: every entry is hashed; bytes sent under another hash are rejected and not stored.
      const hashed = freshChunks()
      const checked = yield* hashedDuring(chunks.putMany(orgId, hashed))
      for (const c of hashed) expect(checked.seen.includes(c.data)).toBe(true)
      const wrong = { hash: Blake3.hash(randomBytes(10)), data: new Uint8Array(randomBytes(100)) }
      const rejected = yield* Effect.flip(chunks.putMany(orgId, [wrong]))
      expect(rejected._tag).toBe("ChunkRejected")
      expect(yield* chunks.missing(orgId, [wrong.hash])).toEqual([wrong.hash])
    }))

  it.effect("a group's small chunks go in one pack at their offsets, a large one alone; rows for stored chunks are kept", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const chunks = yield* ChunkStore
      const orgId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "o2", name: "o2" })}`
      const small = freshChunks()
      const large = new Uint8Array(randomBytes(INLINE_MAX + 1))
      const group = [...small, { hash: Blake3.hash(large), data: large }]
      yield* chunks.putMany(orgId, group)
      yield* chunks.putMany(orgId, group)
      const located = yield* chunks.locate(orgId, group.map((c) => c.hash))
      const pack = located.get(small[0]!.hash)!.pack
      expect(pack).not.toBeNull()
      let offset = 0
      for (const c of small) {
        expect(located.get(c.hash)).toEqual({ hash: c.hash, size: c.data.length, pack, offset })
        offset += c.data.length
      }
      expect(located.get(Blake3.hash(large))).toEqual({ hash: Blake3.hash(large), size: large.length, pack: null, offset: 0 })
      const read = yield* chunks.readLocated(orgId, [...located.values()])
      for (const c of group) expect(Buffer.from(read.get(c.hash)!).equals(Buffer.from(c.data))).toBe(true)
    }))

  it.effect("small chunks that lie in one body as bare frames are stored as that stretch of the body, headers between them included, each at its offset", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const chunks = yield* ChunkStore
      const store = yield* ObjectStore.ObjectStore
      const orgId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "o3", name: "o3" })}`
      const datas = [...Array.from({ length: 6 }, (_, i) => new Uint8Array(randomBytes(500 + i))), new Uint8Array(0), new Uint8Array(randomBytes(9))]
      // A batch's body as grove's client sends it (decoded), and its frames as the upload route takes them: views of it.
      const body = Buffer.concat(Frames.encodeBareFrames(datas.map((data) => ({ data, zstd: false }))))
      const frames = [...Frames.bareFramesIn(body)].map((f) => ({ hash: Blake3.hash(f.data), data: f.data, verified: true as const }))
      expect(frames.every((f) => f.data.buffer === body.buffer)).toBe(true)
      yield* chunks.putMany(orgId, frames)
      const located = yield* chunks.locate(orgId, frames.map((f) => f.hash))
      const pack = located.get(frames[0]!.hash)!.pack!
      // One pack: the body from the first chunk's first byte to the last one's last, named by its hash.
      const stretch = body.subarray(4)
      expect(pack).toBe(Blake3.hash(stretch))
      const object = Buffer.concat([...(yield* Stream.runCollect(store.get({ namespace: namespaceOf(orgId), hash: pack })))])
      expect(object.equals(stretch)).toBe(true)
      for (const f of frames) {
        expect(located.get(f.hash)).toEqual({ hash: f.hash, size: f.data.length, pack, offset: f.data.byteOffset - body.byteOffset - 4 })
      }
      const read = yield* chunks.readLocated(orgId, [...located.values()])
      for (const f of frames) expect(Buffer.from(read.get(f.hash)!).equals(Buffer.from(f.data))).toBe(true)
    }))
})

describe("asArrived", () => {
  it("takes views of one buffer in order with at most a frame header between them; anything else is copied by packBytes", () => {
    const body = new Uint8Array(randomBytes(1000))
    const at = (from: number, to: number) => body.subarray(from, to)
    expect(asArrived([at(4, 100), at(104, 300), at(300, 300), at(300, 310), at(310 + 136, 500)])).toEqual({
      bytes: body.subarray(4, 500),
      offsets: [0, 100, 296, 296, 442]
    })
    expect(asArrived([at(10, 20)])!.bytes.buffer).toBe(body.buffer)
    expect(asArrived([])).toBeUndefined()
    // A gap past a hashed frame's header (a chunk left out), out of order, overlapping, or another buffer.
    expect(asArrived([at(0, 10), at(10 + 137, 200)])).toBeUndefined()
    expect(asArrived([at(100, 200), at(0, 50)])).toBeUndefined()
    expect(asArrived([at(0, 100), at(50, 150)])).toBeUndefined()
    expect(asArrived([at(0, 100), new Uint8Array(randomBytes(10))])).toBeUndefined()
  })
})

describe("packBytes", () => {
  it("lays the chunks back to back in one buffer of their total size, with memory of its own (not the parts' nor a pool's)", () => {
    const parts = [new Uint8Array([1, 2, 3]), new Uint8Array(0), Buffer.from([4, 5]), new Uint8Array(randomBytes(70_000))]
    const pack = packBytes(parts)
    expect(pack.length).toBe(70_005)
    expect(Buffer.from(pack).equals(Buffer.concat(parts))).toBe(true)
    expect({ offset: pack.byteOffset, size: pack.buffer.byteLength }).toEqual({ offset: 0, size: 70_005 })
    pack[0] = 9
    expect(parts[0]![0]).toBe(1)
  })
})
