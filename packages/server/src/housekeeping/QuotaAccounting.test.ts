/**
 * The publish's accounting (content/BranchCommands.account) against a migrated in-memory database: the chunks of the
 * blobs a repository reaches for the first time count once against the organization's quota, whichever
 * repository reaches them first, and no blob row is rewritten (blobs' `referenced` mark is unused since 0018). In a
 * rolling upgrade the previous version's nodes still set that mark in each publish on the migrated schema, and the
 * charge stays right with both kinds of node publishing. A data dir from before 0018 (blobs marked referenced)
 * migrates, publishes and is collected as before. Marking a chunk
 * referenced is a heap-only update (0019 leaves room on chunk pages): no new primary-key entry per chunk.
 */
import { DbEmbedded, Migrations, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import { repositoryColumns, type RepositoryRecord } from "../access/RepositoryRecord.ts"
import { runGc } from "./GcRun.ts"
import { account } from "../content/BranchCommands.ts"
import { ContentObjects } from "../content/ContentObjects.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Store = ObjectStoreLocal.layer({ root: tempDirectory("grove-accounting-") }).pipe(Layer.orDie)

const h = (label: string) => createHash("sha256").update(label).digest("hex")

/** An organization with two repositories; blobs A (chunks 1, 2), B (chunks 2, 3), C (chunk 4), chunk k of k*100 bytes. */
const world = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const orgId = randomUUID()
  const repoIds = [randomUUID(), randomUUID()]
  yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: `o${orgId.slice(0, 8)}`, name: "o" })}`
  for (const [i, id] of repoIds.entries()) yield* sql`INSERT INTO repositories ${sql.insert({ id, org_id: orgId, name: `r${i}` })}`
  const chunk = (k: number) => h(`${orgId} chunk ${k}`)
  const blobs = { A: [1, 2], B: [2, 3], C: [4] }
  for (const k of [1, 2, 3, 4]) {
    yield* sql`INSERT INTO chunks (org_id, hash, size, created_at) VALUES (${orgId}, ${chunk(k)}, ${k * 100}, now() - interval '2 hours')`
  }
  for (const [name, parts] of Object.entries(blobs)) {
    const hash = h(`${orgId} blob ${name}`)
    yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) VALUES (${orgId}, ${hash}, ${parts.reduce((s, k) => s + k * 100, 0)}, ${parts.length})`
    let offset = 0
    for (const [seq, k] of parts.entries()) {
      yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size) VALUES (${orgId}, ${hash}, ${seq}, ${chunk(k)}, ${offset}, ${k * 100})`
      offset += k * 100
    }
  }
  const repo = (i: number) =>
    sql<RepositoryRecord>`SELECT ${repositoryColumns(sql)} FROM repositories r JOIN organizations o ON o.id = r.org_id
      WHERE r.id = ${repoIds[i]!}`.pipe(Effect.map((rows) => rows[0]!))
  return {
    orgId,
    repoIds,
    repo,
    blob: (name: "A" | "B" | "C") => h(`${orgId} blob ${name}`),
    used: sql<{ used: string }>`SELECT used_bytes::text AS used FROM organizations WHERE id = ${orgId}`.pipe(Effect.map((r) => Number(r[0]!.used))),
    referenced: sql<{ hash: string }>`SELECT hash FROM chunks WHERE org_id = ${orgId} AND referenced ORDER BY hash`.pipe(
      Effect.map((rows) => rows.map((r) => r.hash))
    ),
    chunk,
    /** Each blob row's version (xmin): a rewritten row gets a new one. */
    blobVersions: sql<{ hash: string; xmin: string }>`SELECT hash, xmin::text AS xmin FROM blobs WHERE org_id = ${orgId} ORDER BY hash`
  }
})

layer(Layer.mergeAll(ContentObjects.layer.pipe(Layer.provideMerge(Db)), Store), { timeout: 120_000 })("publish accounting", (it) => {
  it.effect("charges each chunk once, whichever repository reaches it first, and rewrites no blob row", () =>
    Effect.gen(function*() {
      const w = yield* world
      const versions = yield* w.blobVersions
      // Repository 0 reaches A and B: chunks 1, 2, 3 count (chunk 2 once).
      yield* account(yield* w.repo(0), { trees: [], blobs: [w.blob("A"), w.blob("B")] })
      expect(yield* w.used).toBe(600)
      expect(yield* w.referenced).toEqual([w.chunk(1), w.chunk(2), w.chunk(3)].sort())
      // Repository 1 reaches B (already counted) and C (new): only chunk 4 counts.
      yield* account(yield* w.repo(1), { trees: [], blobs: [w.blob("B"), w.blob("C")] })
      expect(yield* w.used).toBe(1000)
      // Publishing them again changes nothing.
      yield* account(yield* w.repo(1), { trees: [], blobs: [w.blob("A"), w.blob("B"), w.blob("C")] })
      yield* account(yield* w.repo(0), { trees: [], blobs: [w.blob("A"), w.blob("C")] })
      expect(yield* w.used).toBe(1000)
      expect(yield* w.blobVersions).toEqual(versions)
    }))

  it.effect("the previous version's publish still works on the migrated schema, beside this one's (rolling upgrade)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const w = yield* world
      // A node of the previous version publishing: its account() marked the blobs, then charged the chunks of the
      // blobs it marked first that were not referenced yet (its statements, verbatim but for the repository rows).
      const previousAccount = (blobs: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const firstUse = yield* sql<{ hash: string }>`UPDATE blobs SET referenced = true
            WHERE org_id = ${w.orgId} AND hash = ANY(${blobs}::text[]) AND NOT referenced RETURNING hash`
          if (firstUse.length === 0) return
          const chunks = yield* sql<{ size: string }>`UPDATE chunks SET referenced = true
            WHERE org_id = ${w.orgId} AND NOT referenced AND hash = ANY(ARRAY(
              SELECT chunk_hash FROM blob_chunks WHERE org_id = ${w.orgId} AND blob_hash = ANY(${firstUse.map((r) => r.hash)}::text[])))
            RETURNING size::text AS size`
          const needed = chunks.reduce((sum, c) => sum + Number(c.size), 0)
          if (needed > 0) yield* sql`UPDATE organizations SET used_bytes = used_bytes + ${needed} WHERE id = ${w.orgId}`
        })
      // This version reaches A (chunks 1, 2); the old node then reaches A (unmarked by this version) and B: only chunk 3.
      yield* account(yield* w.repo(0), { trees: [], blobs: [w.blob("A")] })
      expect(yield* w.used).toBe(300)
      yield* previousAccount([w.blob("A"), w.blob("B")])
      expect(yield* w.used).toBe(600)
      // The old node reaches C first; this version reaching it again charges nothing.
      yield* previousAccount([w.blob("C")])
      yield* account(yield* w.repo(1), { trees: [], blobs: [w.blob("B"), w.blob("C")] })
      expect(yield* w.used).toBe(1000)
      expect(yield* w.referenced).toEqual([1, 2, 3, 4].map(w.chunk).sort())
      const comment = yield* sql<{ text: string | null }>`SELECT col_description('blobs'::regclass,
        (SELECT attnum FROM pg_attribute WHERE attrelid = 'blobs'::regclass AND attname = 'referenced')::int) AS text`
      expect(comment[0]!.text).toContain("rolling upgrade")
    }))

  it.effect("a data dir from before 0018 (blobs marked referenced) migrates, publishes and is collected", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The schema as 0017 left it: 0018 and later not applied (they change no column).
      yield* sql`COMMENT ON COLUMN blobs.referenced IS NULL`
      yield* sql`ALTER TABLE chunks RESET (fillfactor)`
      yield* sql`DELETE FROM grove_migrations WHERE migration_id >= 18`
      const w = yield* world
      // What the old publish left: repository 0 reaches A, its blob and chunks marked, the quota charged.
      yield* sql`INSERT INTO repo_blobs (repo_id, blob_hash) VALUES (${w.repoIds[0]!}, ${w.blob("A")})`
      yield* sql`UPDATE blobs SET referenced = true WHERE org_id = ${w.orgId} AND hash = ${w.blob("A")}`
      yield* sql`UPDATE chunks SET referenced = true WHERE org_id = ${w.orgId} AND hash = ANY(${[w.chunk(1), w.chunk(2)]}::text[])`
      yield* sql`UPDATE organizations SET used_bytes = 300 WHERE id = ${w.orgId}`

      expect((yield* Migrations.migrate).applied.slice(0, 2)).toEqual(["0018_blobs_unmarked", "0019_chunks_fillfactor"])

      // Repository 1 reaches A (counted) and B (chunk 3 is new).
      yield* account(yield* w.repo(1), { trees: [], blobs: [w.blob("A"), w.blob("B")] })
      expect(yield* w.used).toBe(600)
      // Both repositories go: gc marks, then (a grace later) frees every blob and chunk and gives the quota back.
      yield* sql`DELETE FROM repositories WHERE org_id = ${w.orgId}`
      const settings = { graceMs: 3_600_000, retention: {} }
      yield* runGc(settings, false)
      yield* sql`UPDATE gc_marks SET marked_at = marked_at - interval '2 hours' WHERE org_id = ${w.orgId}`
      yield* sql`UPDATE audit_log SET created_at = created_at - interval '2 hours' WHERE org_id = ${w.orgId}`
      yield* runGc(settings, false)
      yield* sql`UPDATE gc_marks SET marked_at = marked_at - interval '2 hours' WHERE org_id = ${w.orgId}`
      yield* runGc(settings, false)
      const left = yield* sql<{ n: string }>`SELECT (SELECT count(*) FROM blobs WHERE org_id = ${w.orgId})
        + (SELECT count(*) FROM chunks WHERE org_id = ${w.orgId}) AS n`
      expect(Number(left[0]!.n)).toBe(0)
      expect(yield* w.used).toBe(0)
    }))

  it.effect("marking a push's chunks referenced updates them in place (heap-only), on pages the uploads filled", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const w = yield* world
      // 2,000 one-chunk blobs, their chunks inserted as uploads do (in hash order, a group per statement).
      const blobs = Array.from({ length: 2000 }, (_, i) => h(`${w.orgId} many ${i}`)).sort()
      for (let i = 0; i < blobs.length; i += 250) {
        yield* sql`INSERT INTO chunks (org_id, hash, size, pack, pack_offset)
          SELECT ${w.orgId}, c, 100, ${h(`pack ${i}`)}, 0 FROM unnest(${blobs.slice(i, i + 250)}::text[]) AS c`
      }
      yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) SELECT ${w.orgId}, unnest(${blobs}::text[]), 100, 1`
      yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size)
        SELECT ${w.orgId}, b, 0, b, 0, 100 FROM unnest(${blobs}::text[]) AS b`
      const counts = Effect.gen(function*() {
        yield* sql`SELECT pg_stat_force_next_flush()`
        const [row] = yield* sql<{ updated: string; hot: string }>`SELECT pg_stat_get_tuples_updated('chunks'::regclass)::text AS updated,
          pg_stat_get_tuples_hot_updated('chunks'::regclass)::text AS hot`
        return { updated: Number(row!.updated), hot: Number(row!.hot) }
      })
      const before = yield* counts
      yield* account(yield* w.repo(0), { trees: [], blobs })
      expect(yield* w.used).toBe(200_000)
      const after = yield* counts
      expect(after.updated - before.updated).toBe(2000)
      // A full page moves an updated row to another page (~2% stay in place at fillfactor 100).
      expect(after.hot - before.hot).toBeGreaterThan(1900)
    }))
})
