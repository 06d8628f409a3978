/**
 * A publish's size accounting (BranchCommands.publishPrepared): the bytes lockReferenced found for the pushed blobs are
 * the repository's new bytes when every blob is new to it; otherwise only the new ones are summed. Both databases.
 */
import { DbEmbedded, DbPostgres, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import { startPostgres } from "../../../../scripts/infra/postgres.ts"
import { repositoryColumns, type RepositoryRecord } from "../access/RepositoryRecord.ts"
import { publishPrepared } from "./BranchCommands.ts"

const Embedded = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Postgres = Migrations.layer.pipe(
  Layer.provideMerge(Layer.unwrap(Effect.map(startPostgres(), (server) => DbPostgres.layer({ url: server.url, maxConnections: 3 })))),
  Layer.orDie
)

const h = (label: string) => createHash("sha256").update(label).digest("hex")

for (const [database, Database, options] of [["PGlite", Embedded, {}], ["PostgreSQL", Postgres, { excludeTestServices: true }]] as const) {
  layer(Database, { timeout: 120_000, ...options })(`publish accounting on ${database}`, (it) => {
    it.effect("a repository's size grows by its new blobs' bytes: all new (a first push, >100 blobs or few), some new, none new", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [orgId, repoId] = [randomUUID(), randomUUID()]
        yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: `o${orgId.slice(0, 8)}`, name: "o", quota_bytes: 1e12 })}`
        yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
        // 150 one-chunk blobs of 1..150 bytes.
        const blobs = Array.from({ length: 150 }, (_, i) => ({ hash: h(`${orgId} ${i}`), size: i + 1 }))
        yield* sql`INSERT INTO chunks (org_id, hash, size) SELECT ${orgId}, h, s FROM unnest(${blobs.map((b) => b.hash)}::text[], ${blobs.map((b) => b.size)}::int8[]) AS t(h, s)`
        yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) SELECT ${orgId}, h, s, 1 FROM unnest(${blobs.map((b) => b.hash)}::text[], ${blobs.map((b) => b.size)}::int8[]) AS t(h, s)`
        yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size)
          SELECT ${orgId}, h, 0, h, 0, s FROM unnest(${blobs.map((b) => b.hash)}::text[], ${blobs.map((b) => b.size)}::int8[]) AS t(h, s)`
        const [repo] = yield* sql<RepositoryRecord>`SELECT ${repositoryColumns(sql)} FROM repositories r JOIN organizations o ON o.id = r.org_id WHERE r.id = ${repoId}`
        const size = Effect.map(
          sql<{ size: string; count: string }>`SELECT size_bytes::text AS size, object_count::text AS count FROM repositories WHERE id = ${repoId}`,
          ([row]) => [Number(row!.size), Number(row!.count)]
        )
        const bytes = (from: number, to: number) => blobs.slice(from, to).reduce((sum, b) => sum + b.size, 0)
        const publish = (from: number, to: number, repeat = false) =>
          sql.withTransaction(publishPrepared(repo!, { trees: [], blobs: blobs.slice(from, to).flatMap((b) => repeat ? [b.hash, b.hash] : [b.hash]) }))
        yield* publish(0, 120, true) // all new, a repository's first: listed twice, counted once
        expect(yield* size).toEqual([bytes(0, 120), 120])
        yield* publish(100, 140) // 20 of them reached already
        expect(yield* size).toEqual([bytes(0, 140), 140])
        yield* publish(140, 145) // all new, few
        expect(yield* size).toEqual([bytes(0, 145), 145])
        yield* publish(0, 145) // none new
        expect(yield* size).toEqual([bytes(0, 145), 145])
        const [used] = yield* sql<{ used: string }>`SELECT used_bytes::text AS used FROM organizations WHERE id = ${orgId}`
        expect(Number(used!.used)).toBe(bytes(0, 145))
      }))
  })
}
