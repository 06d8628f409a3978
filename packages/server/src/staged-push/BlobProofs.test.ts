/**
 * Issue 24: a large blob a proof names by chunks FastCDC never cuts (Oak's staged push sends a 10-64 MiB file as ONE
 * chunk) is registered as FastCDC cuts its bytes (content/CanonicalChunks), so a patched version dedups; a blob the
 * organization has keeps its stored list, a list FastCDC could have cut is kept as sent, and bytes that do not hash
 * to the blob leave it missing. The proof service on a migrated in-memory PGlite and a local object store.
 */
import * as FastCdc from "@grove/core/chunking/FastCdc"
import * as Blake3 from "@grove/core/objects/Blake3"
import { mappingDigest } from "@grove/core/objects/MappingDigest"
import { Migrations, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { noise } from "../../../../test/support/content.ts"
import { storeUploaded } from "../content/ChunkUploads.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { type BlobInfo, ContentObjects, type DedupScope } from "../content/ContentObjects.ts"
import { countedDatabase } from "../db/CountedDatabase.testing.ts"
import { repositoryRows } from "../entities/Commands.testing.ts"
import { BlobProofs } from "./BlobProofs.ts"

const { layer: Counted } = countedDatabase()
const Db = Migrations.layer.pipe(Layer.provideMerge(Counted), Layer.orDie)
const Store = ObjectStoreLocal.layer({ root: tempDirectory("grove-blob-proofs-") }).pipe(Layer.orDie)
const Content = Layer.mergeAll(ContentObjects.layer, ChunkStore.layer).pipe(Layer.provideMerge(Layer.merge(Db, Store)))
const Services = BlobProofs.layer.pipe(Layer.provideMerge(Content))

const MiB = 1024 * 1024
type Part = { readonly offset: number; readonly size: number }
const cuts = (bytes: Uint8Array): Array<Part> => FastCdc.boundaries(bytes).map((b) => ({ offset: b.offset, size: b.length }))
const shape = (chunks: ReadonlyArray<Part>) => chunks.map((c) => ({ offset: c.offset, size: c.size }))

const world = Effect.gen(function*() {
  const { orgId, repoId } = yield* repositoryRows(`o${randomUUID().slice(0, 8)}`)
  const scope: DedupScope = { orgId, repoId, principal: "user:u", readable: [repoId], restricted: [] }
  const objects = yield* ContentObjects
  const proofs = yield* BlobProofs
  /** Proves `hash` (of `size` bytes) mapped to `chunks`, uploading `uploads` first, as the client does; answers the proof. */
  const prove = (hash: string, size: number, chunks: ReadonlyArray<{ hash: string; offset: number; size: number }>, uploads: ReadonlyArray<Uint8Array>) =>
    Effect.gen(function*() {
      yield* storeUploaded(orgId, scope, uploads.map((data) => ({ hash: Blake3.hash(data), data })))
      const created = yield* proofs.create(scope, [{ hash, size, mapping_digest: mappingDigest(chunks), total_chunks: chunks.length }])
      const token = created.body.mapping_proof_job!.token
      yield* proofs.putPages(scope, token, [{ blob_index: 0, first_chunk_index: 0, chunks }])
      let answer = yield* proofs.finalize(scope, token)
      while (answer.status === 202) {
        yield* Effect.sleep("50 millis")
        answer = yield* proofs.poll(scope, token)
      }
      return answer.body
    })
  /** Proves `bytes` as the chunks `parts` cut from them. */
  const proveAs = (bytes: Uint8Array, parts: ReadonlyArray<Part>) => {
    const pieces = parts.map((p) => bytes.subarray(p.offset, p.offset + p.size))
    return prove(Blake3.hash(bytes), bytes.length, parts.map((p, i) => ({ hash: Blake3.hash(pieces[i]!), ...p })), pieces)
  }
  const stored = (hash: string) => Effect.map(objects.blobInfo(orgId, [hash]), (m) => m.get(hash)?.chunks)
  return { orgId, scope, objects, prove, proveAs, stored }
})

layer(Services, { timeout: 120_000, excludeTestServices: true })("blob proofs of large blobs", (it) => {
  it.effect("a blob of 10 MiB or more proven as one chunk is registered as FastCDC cuts it; the pieces count as the caller's", () =>
    Effect.gen(function*() {
      const w = yield* world
      const bytes = noise(11 * MiB, 11)
      const hash = Blake3.hash(bytes)
      const proof = yield* w.proveAs(bytes, [{ offset: 0, size: bytes.length }])
      expect(proof.verified).toEqual([hash])
      // On the old code: the one chunk of 11 MiB the client sent.
      const chunks = (yield* w.stored(hash))!
      expect(shape(chunks)).toEqual(cuts(bytes))
      expect(chunks.length).toBeGreaterThan(2)
      for (const c of chunks) expect(c.hash).toBe(Blake3.hash(bytes.subarray(c.offset, c.offset + c.size)))
      // Stored and granted: a patched version's unchanged chunks are not asked for again, and they read back as the blob.
      expect((yield* w.objects.present("chunk", w.scope, chunks.map((c) => c.hash))).size).toBe(chunks.length)
      const store = yield* ChunkStore
      const read = yield* store.readLocated(w.orgId, [...(yield* store.locate(w.orgId, chunks.map((c) => c.hash))).values()])
      expect(Buffer.concat(chunks.map((c) => read.get(c.hash)!)).equals(bytes)).toBe(true)
    }))

  it.effect("a blob the organization has keeps its stored chunk list: a mapping never changes", () =>
    Effect.gen(function*() {
      const w = yield* world
      const bytes = noise(11 * MiB, 12)
      const hash = Blake3.hash(bytes)
      // As the old code registered it: one chunk of all its bytes.
      yield* storeUploaded(w.orgId, w.scope, [{ hash, data: bytes }])
      const whole: BlobInfo = { hash, size: bytes.length, chunks: [{ hash, offset: 0, size: bytes.length }] }
      yield* w.objects.registerBlobs(w.orgId, [whole])
      expect((yield* w.proveAs(bytes, [{ offset: 0, size: bytes.length }])).verified).toEqual([hash])
      expect(shape((yield* w.stored(hash))!)).toEqual([{ offset: 0, size: bytes.length }])
    }))

  it.effect("a list FastCDC could have cut (no chunk above 4 MiB) is kept as sent", () =>
    Effect.gen(function*() {
      const w = yield* world
      const bytes = noise(12 * MiB, 13)
      const parts = [0, 1, 2, 3].map((i) => ({ offset: i * 3 * MiB, size: 3 * MiB }))
      expect((yield* w.proveAs(bytes, parts)).verified).toEqual([Blake3.hash(bytes)])
      expect(shape((yield* w.stored(Blake3.hash(bytes)))!)).toEqual(parts)
    }))

  it.effect("an uncut list whose bytes do not hash to the blob leaves it missing, and registers nothing", () =>
    Effect.gen(function*() {
      const w = yield* world
      const bytes = noise(11 * MiB, 14)
      const other = noise(11 * MiB, 15)
      const hash = Blake3.hash(bytes)
      const proof = yield* w.prove(hash, bytes.length, [{ hash: Blake3.hash(other), offset: 0, size: other.length }], [other])
      expect(proof).toMatchObject({ verified: [], missing: [hash] })
      expect(yield* w.stored(hash)).toBeUndefined()
    }))

  it.effect("what a proof does with the caller's bytes does not tell whether the organization holds a blob it cannot read", () =>
    Effect.gen(function*() {
      const w = yield* world
      // A secret 11 MiB blob in another repository of the organization, which the caller cannot read.
      const { orgId } = w.scope
      const objects = yield* ContentObjects
      const secret = noise(11 * MiB, 101)
      const secretCuts = cuts(secret).map((p) => ({ ...p, hash: Blake3.hash(secret.subarray(p.offset, p.offset + p.size)) }))
      const secretRepo = randomUUID()
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO repositories ${sql.insert({ id: secretRepo, org_id: orgId, name: "secret" })}`
      const owner: DedupScope = { ...w.scope, repoId: secretRepo, principal: "user:owner", readable: [secretRepo] }
      yield* storeUploaded(orgId, owner, secretCuts.map((c) => ({ hash: c.hash, data: secret.subarray(c.offset, c.offset + c.size) })))
      yield* objects.registerBlobs(orgId, [{ hash: Blake3.hash(secret), size: secret.length, chunks: secretCuts }])
      // The caller names a hash by its own garbage, uncut: the secret's hash, then one nobody has.
      const probe = (guess: string, seed: number) =>
        Effect.gen(function*() {
          const garbage = noise(11 * MiB, seed)
          const proof = yield* w.prove(guess, garbage.length, [{ hash: Blake3.hash(garbage), offset: 0, size: garbage.length }], [garbage])
          const pieces = cuts(garbage).map((p) => Blake3.hash(garbage.subarray(p.offset, p.offset + p.size)))
          return { missing: proof.missing, present: (yield* objects.present("chunk", w.scope, pieces)).size, pieces: pieces.length }
        })
      const exists = yield* probe(Blake3.hash(secret), 201)
      const absent = yield* probe(Blake3.hash(noise(1024, 7)), 202)
      expect(exists.missing).toEqual([Blake3.hash(secret)])
      // Cut and granted alike in both cases (the old code cut only when the organization lacked the hash: 0 of 12).
      expect(exists.present).toBe(exists.pieces)
      expect(absent.present).toBe(absent.pieces)
      // The secret keeps its list.
      expect(shape((yield* w.stored(Blake3.hash(secret)))!)).toEqual(shape(secretCuts))
    }))
})
