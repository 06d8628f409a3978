/**
 * Tree bodies and staged push lists are written uncompressed (migration 0024: pglz saved ~25% of a tree body and
 * nothing of a staged list, for a large share of a push's CPU), on both databases; what is written reads back the
 * same, and a body stored compressed before the migration still reads.
 */
import { DbEmbedded, DbPostgres, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import { startPostgres } from "../../../../scripts/infra/postgres.ts"
import { ContentObjects } from "./ContentObjects.ts"

const Embedded = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Postgres = Migrations.layer.pipe(
  Layer.provideMerge(Layer.unwrap(Effect.map(startPostgres(), (server) => DbPostgres.layer({ url: server.url, maxConnections: 3 })))),
  Layer.orDie
)

const h = (label: string) => createHash("sha256").update(label).digest("hex")

/** A canonical tree body of `n` files (TreeText's form), ~100 bytes an entry: past the ~2 KB that is stored out of line. */
const treeBody = (n: number, seed: string) =>
  Array.from({ length: n }, (_, i) => `blob\tfile-${String(i).padStart(4, "0")}.ts\t${h(`${seed} ${i}`)}\tregular`).join("\n")

for (const [database, Database, options] of [["PGlite", Embedded, {}], ["PostgreSQL", Postgres, { excludeTestServices: true }]] as const) {
  layer(ContentObjects.layer.pipe(Layer.provideMerge(Database)), { timeout: 120_000, ...options })(`push rows' storage on ${database}`, (it) => {
    it.effect("a big tree body and a staged push list are stored uncompressed and read back whole; a compressed body still reads", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const objects = yield* ContentObjects
        const [orgId, repoId] = [randomUUID(), randomUUID()]
        yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: `o${orgId.slice(0, 8)}`, name: "o" })}`
        yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
        const storage = yield* sql<{ relname: string; attstorage: string }>`SELECT c.relname, a.attstorage FROM pg_attribute a
          JOIN pg_class c ON c.oid = a.attrelid WHERE (c.relname, a.attname) IN (('trees', 'body'), ('staged_pushes', 'body'))
          ORDER BY c.relname`
        expect(storage.map((r) => `${r.relname} ${r.attstorage}`)).toEqual(["staged_pushes e", "trees e"])

        const body = treeBody(1000, orgId)
        const tree = h(`${orgId} tree`)
        yield* objects.storeTrees(orgId, [{ hash: tree, body }])
        // A body written before 0024 (compressed), as an old data dir holds it: compression is per value.
        const old = h(`${orgId} old tree`)
        const oldBody = treeBody(1000, `${orgId} old`).replaceAll(/\t[0-9a-f]{64}\t/g, `\t${old}\t`) // compressible: one hash

        yield* sql`ALTER TABLE trees ALTER COLUMN body SET STORAGE EXTENDED`
        yield* sql`INSERT INTO trees (org_id, hash, body) VALUES (${orgId}, ${old}, ${oldBody})`
        yield* sql`ALTER TABLE trees ALTER COLUMN body SET STORAGE EXTERNAL`
        const stored = yield* sql<{ hash: string; raw: number; size: number; compression: string | null; body: string }>`SELECT hash,
          octet_length(body) AS raw, pg_column_size(body) AS size, pg_column_compression(body) AS compression, body
          FROM trees WHERE org_id = ${orgId} ORDER BY hash = ${tree}`
        const [before, after] = stored
        expect([after!.hash, after!.compression, after!.size >= after!.raw, after!.body === body]).toEqual([tree, null, true, true])
        expect([before!.hash, before!.compression, before!.size < before!.raw, before!.body === oldBody]).toEqual([old, "pglz", true, true])

        const blobs = Array.from({ length: 5000 }, (_, i) => h(`${orgId} blob ${i}`))
        const id = yield* objects.stagePush(repoId, { trees: [tree], blobs })
        const [staged] = yield* sql<{ compression: string | null; size: number; body: unknown }>`SELECT
          pg_column_compression(body) AS compression, pg_column_size(body) AS size, body FROM staged_pushes WHERE id = ${id}`
        const list = typeof staged!.body === "string" ? JSON.parse(staged!.body) : staged!.body
        expect([staged!.compression, staged!.size > 5000 * 64, list.blobs.length, list.blobs[4999], list.trees]).toEqual([null, true, 5000, blobs[4999], [tree]])
      }))
  })
}
