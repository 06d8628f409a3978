/**
 * The bulk inserts with ON CONFLICT (registerBlobs, storeTrees, recordUploads) on PostgreSQL: two pushes writing the
 * same rows at once, given in opposite orders, both succeed. Each statement takes the rows' locks in the order it
 * inserts them; in opposite orders the two waited for each other and one failed with a deadlock (40P01).
 * PGlite has one connection, so only PostgreSQL shows it.
 */
import { DbPostgres, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import { startPostgres } from "../../../../scripts/infra/postgres.ts"
import { ContentObjects } from "./ContentObjects.ts"

const Postgres = Layer.unwrap(Effect.map(startPostgres(), (server) => DbPostgres.layer({ url: server.url, maxConnections: 4 })))
const Objects = ContentObjects.layer.pipe(Layer.provideMerge(Migrations.layer.pipe(Layer.provideMerge(Postgres), Layer.orDie)))

const h = (label: string) => createHash("sha256").update(label).digest("hex")
const ROWS = 5000

layer(Objects, { timeout: 300_000, excludeTestServices: true })("ContentObjects on PostgreSQL", (it) => {
  it.effect("two pushes writing the same blobs, trees and grants in opposite orders at once both succeed", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const objects = yield* ContentObjects
      const orgId = randomUUID()
      const repoId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "order", name: "order" })}`
      yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
      for (let round = 0; round < 3; round++) {
        const hashes = Array.from({ length: ROWS }, (_, i) => h(`${round} ${i}`))
        const blobs = hashes.map((hash) => ({ hash, size: 1, chunks: [{ hash: h(`chunk ${hash}`), offset: 0, size: 1 }] }))
        const trees = hashes.map((hash) => ({ hash, body: `body ${hash}` }))
        const scope = { repoId, principal: "user:me" }
        yield* Effect.all([
          objects.registerBlobs(orgId, blobs),
          objects.registerBlobs(orgId, [...blobs].reverse()),
          objects.storeTrees(orgId, trees),
          objects.storeTrees(orgId, [...trees].reverse()),
          objects.recordUploads(scope, hashes),
          objects.recordUploads(scope, [...hashes].reverse())
        ], { concurrency: "unbounded", discard: true })
        const [counts] = yield* sql<{ blobs: string; chunks: string; trees: string; grants: string }>`SELECT
          (SELECT count(*) FROM blobs WHERE org_id = ${orgId} AND hash = ANY(${hashes}))::text AS blobs,
          (SELECT count(*) FROM blob_chunks WHERE org_id = ${orgId} AND blob_hash = ANY(${hashes}))::text AS chunks,
          (SELECT count(*) FROM trees WHERE org_id = ${orgId} AND hash = ANY(${hashes}))::text AS trees,
          (SELECT count(*) FROM object_uploads WHERE repo_id = ${repoId} AND hash = ANY(${hashes}))::text AS grants`
        expect(counts).toEqual({ blobs: String(ROWS), chunks: String(ROWS), trees: String(ROWS), grants: String(ROWS) })
      }
    }))
})
