/**
 * locateReachable: a chunk fetch's access check and locate in one statement (reachableChunks: the check alone;
 * chunkOwners: the blobs that hold the chunks, for path permissions). It answers exactly the chunks a blob of
 * the repository reaches in its organization, on PGlite and on PostgreSQL (StaleStatistics.test: it stays near-linear on
 * stale statistics).
 */
import { DbEmbedded, DbPostgres, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import { startPostgres } from "../../../../scripts/infra/postgres.ts"
import { chunkOwners, locateReachable, reachableChunks } from "./ChunkReads.ts"

const Embedded = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Postgres = Migrations.layer.pipe(
  Layer.provideMerge(Layer.unwrap(Effect.map(startPostgres(), (server) => DbPostgres.layer({ url: server.url, maxConnections: 4 })))),
  Layer.orDie
)

const h = (label: string) => createHash("sha256").update(label).digest("hex")

/** An organization with two repositories and `n` one-chunk blobs (half in a pack), all reached by the first. */
const organization = Effect.fnUntraced(function*(n: number) {
  const sql = yield* SqlClient.SqlClient
  const [orgId, repoId, otherRepoId] = [randomUUID(), randomUUID(), randomUUID()]
  yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: orgId, name: "o" })}`
  yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
  yield* sql`INSERT INTO repositories ${sql.insert({ id: otherRepoId, org_id: orgId, name: "other" })}`
  const blobs = Array.from({ length: n }, (_, i) => h(`${orgId} ${i}`))
  const chunks = blobs.map((b) => h(`chunk ${b}`))
  const packs = chunks.map((_, i) => (i % 2 === 0 ? "pack" : ""))
  yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) SELECT ${orgId}, unnest(${blobs}::text[]), 1, 1`
  yield* sql`INSERT INTO chunks (org_id, hash, size, pack, pack_offset)
    SELECT ${orgId}, c, 7, NULLIF(p, ''), CASE WHEN p = '' THEN NULL ELSE o END
    FROM unnest(${chunks}::text[], ${packs}::text[]) WITH ORDINALITY AS t(c, p, o)`
  yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size)
    SELECT ${orgId}, b, 0, c, 0, 7 FROM unnest(${blobs}::text[], ${chunks}::text[]) AS t(b, c)`
  yield* sql`INSERT INTO repo_blobs (repo_id, blob_hash) SELECT ${repoId}, unnest(${blobs}::text[])`
  return { orgId, repoId, otherRepoId, blobs, chunks }
})

for (const [database, Db, options] of [["PGlite", Embedded, {}], ["PostgreSQL", Postgres, { excludeTestServices: true }]] as const) {
  layer(Db, { timeout: 300_000, ...options })(`locateReachable on ${database}`, (it) => {
    it.effect("answers only chunks the repository reaches in its organization, with their places", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const org = yield* organization(6)
        const stranger = yield* organization(2)
        // A chunk the organization has that no blob reaches, and a blob of the other repository only.
        const loose = h("loose")
        yield* sql`INSERT INTO chunks (org_id, hash, size) VALUES (${org.orgId}, ${loose}, 3)`
        const [otherBlob, otherChunk] = [h("other blob"), h("other chunk")]
        yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) VALUES (${org.orgId}, ${otherBlob}, 3, 1)`
        yield* sql`INSERT INTO chunks (org_id, hash, size) VALUES (${org.orgId}, ${otherChunk}, 3)`
        yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size)
          VALUES (${org.orgId}, ${otherBlob}, 0, ${otherChunk}, 0, 3)`
        yield* sql`INSERT INTO repo_blobs (repo_id, blob_hash) VALUES (${org.otherRepoId}, ${otherBlob})`

        const asked = [...org.chunks, loose, otherChunk, stranger.chunks[0]!, h("nowhere"), org.chunks[0]!]
        const located = yield* locateReachable(org.repoId, org.orgId, asked)
        expect([...located.keys()].sort()).toEqual([...org.chunks].sort())
        expect(located.get(org.chunks[0]!)).toEqual({ hash: org.chunks[0], size: 7, pack: "pack", offset: 1 })
        expect(located.get(org.chunks[1]!)).toEqual({ hash: org.chunks[1], size: 7, pack: null, offset: 0 })
        // Through the other repository: its own chunk only.
        expect([...(yield* locateReachable(org.otherRepoId, org.orgId, asked)).keys()]).toEqual([otherChunk])
        // The right repository in the wrong organization: nothing.
        expect((yield* locateReachable(org.repoId, stranger.orgId, asked)).size).toBe(0)
        // Over 100 hashes the statement runs unprepared (db/Batches.ts): the same answer.
        const large = yield* organization(150)
        const many = yield* locateReachable(large.repoId, large.orgId, [...large.chunks, otherChunk, loose])
        expect([...many.keys()].sort()).toEqual([...large.chunks].sort())

        // reachableChunks (the Oak client's chunks/download): the same hashes, without their places.
        const sorted = (set: ReadonlySet<string>) => [...set].sort()
        expect(sorted(yield* reachableChunks(org.repoId, org.orgId, asked))).toEqual([...org.chunks].sort())
        expect(sorted(yield* reachableChunks(org.otherRepoId, org.orgId, asked))).toEqual([otherChunk])
        expect((yield* reachableChunks(org.repoId, stranger.orgId, asked)).size).toBe(0)
        expect(sorted(yield* reachableChunks(large.repoId, large.orgId, [...large.chunks, otherChunk, loose]))).toEqual([...large.chunks].sort())
      }))

    it.effect("a stored chunk with the hash of a blob of the repository is that blob (a small file): reached by the blob's row", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const org = yield* organization(2)
        // Small files: one chunk each, with the blob's hash. `mapped` has its blob_chunks row as a push writes it;
        // `bare` has none, so only the repo_blobs probe on the chunk's own hash proves it (the old statement did not).
        const [mapped, bare, others, large] = [h("mapped"), h("bare"), h("others"), h("large blob")]
        yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) VALUES (${org.orgId}, ${mapped}, 5, 1), (${org.orgId}, ${bare}, 5, 1),
          (${org.orgId}, ${others}, 5, 1), (${org.orgId}, ${large}, 14, 2)`
        yield* sql`INSERT INTO chunks (org_id, hash, size, pack, pack_offset) VALUES (${org.orgId}, ${mapped}, 5, 'pack', 40),
          (${org.orgId}, ${bare}, 5, NULL, NULL), (${org.orgId}, ${others}, 5, NULL, NULL)`
        yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size) VALUES
          (${org.orgId}, ${mapped}, 0, ${mapped}, 0, 5), (${org.orgId}, ${others}, 0, ${others}, 0, 5),
          (${org.orgId}, ${large}, 0, ${org.chunks[0]!}, 0, 7), (${org.orgId}, ${large}, 1, ${org.chunks[1]!}, 7, 7)`
        // The large blob's own hash names no stored chunk; `others` belongs to the other repository only.
        yield* sql`INSERT INTO repo_blobs (repo_id, blob_hash) VALUES (${org.repoId}, ${mapped}), (${org.repoId}, ${bare}),
          (${org.repoId}, ${large}), (${org.otherRepoId}, ${others})`
        const asked = [mapped, bare, others, large, org.chunks[0]!]
        const located = yield* locateReachable(org.repoId, org.orgId, asked)
        expect([...located.keys()].sort()).toEqual([mapped, bare, org.chunks[0]!].sort())
        expect(located.get(mapped)).toEqual({ hash: mapped, size: 5, pack: "pack", offset: 40 })
        expect(located.get(bare)).toEqual({ hash: bare, size: 5, pack: null, offset: 0 })
        expect([...(yield* locateReachable(org.otherRepoId, org.orgId, asked)).keys()]).toEqual([others])
        expect((yield* locateReachable(org.repoId, randomUUID(), asked)).size).toBe(0)
        // reachableChunks keeps the blob_chunks path alone: a blob's hash is not a chunk of it by itself.
        expect([...(yield* reachableChunks(org.repoId, org.orgId, asked))].sort()).toEqual([mapped, org.chunks[0]!].sort())
      }))

    it.effect("chunkOwners: each asked chunk with each blob of the repository that holds it, once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const org = yield* organization(3)
        // A blob of the repository holding its first chunk twice and its second; a blob of the other repository
        // holding the first chunk too.
        const [twice, others] = [h("twice"), h("others")]
        yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) VALUES (${org.orgId}, ${twice}, 21, 3), (${org.orgId}, ${others}, 7, 1)`
        yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size) VALUES
          (${org.orgId}, ${twice}, 0, ${org.chunks[0]!}, 0, 7), (${org.orgId}, ${twice}, 1, ${org.chunks[0]!}, 7, 7),
          (${org.orgId}, ${twice}, 2, ${org.chunks[1]!}, 14, 7), (${org.orgId}, ${others}, 0, ${org.chunks[0]!}, 0, 7)`
        yield* sql`INSERT INTO repo_blobs (repo_id, blob_hash) VALUES (${org.repoId}, ${twice}), (${org.otherRepoId}, ${others})`
        const pairs = (rows: ReadonlyArray<{ chunk: string; blob: string }>) => rows.map((r) => `${r.chunk} ${r.blob}`).sort()
        const asked = [...org.chunks, org.chunks[0]!, h("nowhere")]
        expect(pairs(yield* chunkOwners(org.repoId, org.orgId, asked))).toEqual([
          ...org.chunks.map((c, i) => `${c} ${org.blobs[i]}`),
          `${org.chunks[0]} ${twice}`,
          `${org.chunks[1]} ${twice}`
        ].sort())
        expect(pairs(yield* chunkOwners(org.otherRepoId, org.orgId, asked))).toEqual([`${org.chunks[0]} ${others}`])
        expect(yield* chunkOwners(org.repoId, randomUUID(), asked)).toEqual([])
        // Over 100 hashes (unprepared): the same pairs.
        const large = yield* organization(150)
        expect(pairs(yield* chunkOwners(large.repoId, large.orgId, [...large.chunks, ...org.chunks]))).toEqual(
          large.chunks.map((c, i) => `${c} ${large.blobs[i]}`).sort()
        )
      }))
  })
}
