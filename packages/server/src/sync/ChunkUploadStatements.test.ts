/**
 * content/ChunkUploads.storeUploaded (what each group of a chunks/batch upload runs) on a counted connection to a migrated in-memory
 * PGlite: a group of new chunks costs two statements, the lookup of which the organization has and then the
 * new rows with the caller's grants in one (they were two: a 50 MiB push ran 26 more); a group of chunks the
 * organization has costs the lookup and the grants. Each chunk ends stored, readable and granted to the caller.
 */
import { expect, layer } from "@effect/vitest"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Migrations, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { Effect, Layer, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes, randomUUID } from "node:crypto"
import { countedDatabase } from "../merges/MergeFixtures.testing.ts"
import { ChunkStore, INLINE_MAX } from "../content/ChunkStore.ts"
import { storeUploaded } from "../content/ChunkUploads.ts"
import { ContentObjects } from "../content/ContentObjects.ts"

const { traffic, layer: Counted } = countedDatabase()
const Db = Migrations.layer.pipe(Layer.provideMerge(Counted), Layer.orDie)
const Live = Layer.mergeAll(ChunkStore.layer, ContentObjects.layer).pipe(
  Layer.provideMerge(ObjectStoreLocal.layer({ root: tempDirectory("grove-chunkuploads-") }).pipe(Layer.orDie)),
  Layer.provideMerge(Db)
)

const chunksOf = (sizes: ReadonlyArray<number>) =>
  sizes.map((size) => {
    const data = new Uint8Array(randomBytes(size))
    return { hash: Blake3.hash(data), data }
  })

layer(Live, { timeout: 60_000 })("storeUploaded", (it) => {
  it.effect("a group of new chunks is looked up, then its rows and grants go in one statement; a group stored already, the lookup and grants", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const chunks = yield* ChunkStore
      const orgId = randomUUID()
      const repoId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "o1", name: "o1" })}`
      yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
      const scope = { repoId, principal: "user:me" }
      const granted = () =>
        Effect.map(
          sql<{ hash: string }>`SELECT hash FROM object_uploads WHERE repo_id = ${repoId} AND principal = 'user:me'`,
          (rows) => new Set(rows.map((r) => r.hash))
        )
      // 20 small chunks (one pack) and one large one (an object of its own).
      const group = [...chunksOf(Array.from({ length: 20 }, (_, i) => 1000 + i)), ...chunksOf([INLINE_MAX + 1])]

      let before = traffic.statements.length
      yield* storeUploaded(orgId, scope, group)
      const first = traffic.statements.slice(before)
      expect(first.length, first.map((s, i) => `${i + 1}. ${s.slice(0, 100)}`).join("\n")).toBe(2)
      expect(first[0]).toMatch(/^SELECT c\.\* FROM unnest.* FROM chunks WHERE/)
      expect(first[1]).toMatch(/INSERT INTO chunks .*INSERT INTO object_uploads/)
      // Rows this statement inserts are granted as inserted: no chunk or gc mark of theirs is looked up.
      expect(first[1]).not.toMatch(/gc_marks|FROM chunks/)
      for (const c of group) {
        const stored = Buffer.concat([...(yield* Stream.runCollect(chunks.read(orgId, c.hash)))])
        expect(stored.equals(Buffer.from(c.data))).toBe(true)
      }
      expect(yield* granted()).toEqual(new Set(group.map((c) => c.hash)))

      // The same group again, and one new chunk with it, from another caller: no byte rewritten, all granted.
      const again = [...group, ...chunksOf([777])]
      before = traffic.statements.length
      yield* storeUploaded(orgId, { repoId, principal: "user:other" }, again)
      expect(traffic.statements.length - before).toBe(2)
      const other = yield* sql<{ hash: string }>`SELECT hash FROM object_uploads WHERE repo_id = ${repoId} AND principal = 'user:other'`
      expect(new Set(other.map((r) => r.hash))).toEqual(new Set(again.map((c) => c.hash)))
      const [count] = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM chunks WHERE org_id = ${orgId}`
      expect(Number(count!.n)).toBe(again.length)
    }))

  it.effect("a chunk whose row another upload inserted between the lookup and the grant is answered gone, then found and granted", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const objects = yield* ContentObjects
      const orgId = randomUUID()
      const repoId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "o2", name: "o2" })}`
      yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
      const scope = { repoId, principal: "user:late" }
      const [raced, alone] = chunksOf([500, 600])
      // The other upload's row, written after this one's lookup found nothing: this insert meets it.
      yield* sql`INSERT INTO chunks ${sql.insert({ org_id: orgId, hash: raced!.hash, size: 500 })}`
      const rows = [raced!, alone!].map((c) => ({ hash: c.hash, size: c.data.length, pack: "", offset: 0 }))
      const gone = yield* objects.recordChunkUploads(scope, orgId, rows.map((r) => r.hash), rows)
      expect([...gone]).toEqual([raced!.hash])
      const grants = () =>
        Effect.map(sql<{ hash: string }>`SELECT hash FROM object_uploads WHERE repo_id = ${repoId} AND principal = 'user:late'`, (r) => new Set(r.map((x) => x.hash)))
      expect(yield* grants()).toEqual(new Set([alone!.hash]))
      // What the upload route runs next (ChunkUploads' next round): the row is found now, and granted.
      expect([...(yield* objects.recordChunkUploads(scope, orgId, [raced!.hash]))]).toEqual([])
      expect(yield* grants()).toEqual(new Set([raced!.hash, alone!.hash]))
    }))
})
