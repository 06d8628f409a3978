/**
 * Gc's mark-and-sweep against a migrated in-memory database and a local object store, time moved by
 * back-dating rows (grace 1 h): what is unreferenced is marked, and its old upload grants revoked; a
 * mark is swept only when due and still unreferenced. The race cases: an upload after the mark (a new
 * grant), a publish after the mark, a repository deleted after the mark; packs go with their last
 * chunk row; the quota gets back what it counted; a dry run changes nothing; uploading an object again
 * renews its old grant, so a push re-sending it is not undercut by a mark.
 */
import { DbEmbedded, Migrations, ObjectStore, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import { ContentObjects } from "../content/ContentObjects.ts"
import { runGc } from "./GcRun.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Store = ObjectStoreLocal.layer({ root: tempDirectory("grove-gc-unit-") }).pipe(Layer.orDie)

const h = (label: string) => createHash("sha256").update(label).digest("hex")
const SETTINGS = { graceMs: 3_600_000, retention: {} }

/** One organization with one repository and helpers to lay out content and move time. */
const world = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const store = yield* ObjectStore.ObjectStore
  const orgId = randomUUID()
  const repoId = randomUUID()
  yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: `o${orgId.slice(0, 8)}`, name: "o" })}`
  yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
  const put = (hash: string) => store.put({ namespace: orgId, hash }, Stream.make(new TextEncoder().encode(hash)))
  return {
    orgId,
    repoId,
    /** A chunk stored two hours ago (alone, or in `pack`), optionally counted in the quota. */
    chunk: (hash: string, options: { pack?: string; referenced?: boolean } = {}) =>
      Effect.gen(function*() {
        yield* put(options.pack ?? hash)
        yield* sql`INSERT INTO chunks (org_id, hash, size, pack, pack_offset, referenced, created_at)
          VALUES (${orgId}, ${hash}, 100, ${options.pack ?? null}, ${options.pack === undefined ? null : 0}, ${options.referenced ?? false},
            now() - interval '2 hours')`
      }),
    blob: (hash: string, chunk: string) =>
      Effect.gen(function*() {
        yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) VALUES (${orgId}, ${hash}, 100, 1)`
        yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size) VALUES (${orgId}, ${hash}, 0, ${chunk}, 0, 100)`
      }),
    grant: (hash: string, age: string) =>
      sql`INSERT INTO object_uploads (repo_id, principal, hash, created_at) VALUES (${repoId}, 'user:u', ${hash}, now() - ${age}::interval)`,
    publish: (blob: string) => sql`INSERT INTO repo_blobs (repo_id, blob_hash) VALUES (${repoId}, ${blob})`,
    /** The grace passes for every mark (and for the audit entries before them). */
    passGrace: Effect.gen(function*() {
      yield* sql`UPDATE gc_marks SET marked_at = marked_at - interval '2 hours' WHERE org_id = ${orgId}`
      yield* sql`UPDATE audit_log SET created_at = created_at - interval '2 hours' WHERE org_id = ${orgId}`
    }),
    rows: (table: "chunks" | "blobs") =>
      sql<{ hash: string }>`SELECT hash FROM ${sql(table)} WHERE org_id = ${orgId} ORDER BY hash`.pipe(Effect.map((r) => r.map((x) => x.hash))),
    grants: sql<{ hash: string }>`SELECT hash FROM object_uploads WHERE repo_id = ${repoId} ORDER BY hash`.pipe(Effect.map((r) => r.map((x) => x.hash))),
    marks: sql<{ kind: string; hash: string }>`SELECT kind, hash FROM gc_marks WHERE org_id = ${orgId} ORDER BY kind, hash`,
    stored: (hash: string) => store.has({ namespace: orgId, hash }),
    used: sql<{ used: string }>`SELECT used_bytes::text AS used FROM organizations WHERE id = ${orgId}`.pipe(Effect.map((r) => Number(r[0]!.used))),
    setUsed: (bytes: number) => sql`UPDATE organizations SET used_bytes = ${bytes} WHERE id = ${orgId}`
  }
})

layer(Layer.mergeAll(ContentObjects.layer.pipe(Layer.provideMerge(Db)), Store), { timeout: 120_000 })("gc mark and sweep", (it) => {
  it.effect("marks what nothing references and revokes its old grants; sweeps it only when due; a dry run changes nothing", () =>
    Effect.gen(function*() {
      const w = yield* world
      const [stray, used, blob] = [h("stray"), h("used"), h("blob")]
      yield* w.chunk(stray)
      yield* w.chunk(used)
      yield* w.blob(blob, used)
      yield* w.publish(blob)
      yield* w.grant(stray, "2 hours")
      const dry = yield* runGc(SETTINGS, true)
      expect(dry.content.marked).toEqual({ blobs: 0, chunks: 1 })
      expect(yield* w.marks).toEqual([])
      expect(yield* w.grants).toEqual([stray])
      const first = yield* runGc(SETTINGS, false)
      expect(first.content.marked).toEqual({ blobs: 0, chunks: 1 })
      expect(yield* w.marks).toEqual([{ kind: "chunk", hash: stray }])
      expect(yield* w.grants).toEqual([])
      // Not due yet: nothing freed.
      expect((yield* runGc(SETTINGS, false)).content.freed.chunks).toBe(0)
      yield* w.passGrace
      const dryFree = yield* runGc(SETTINGS, true)
      expect(dryFree.content.freed).toMatchObject({ chunks: 1, objects: 1, bytes: 100 })
      expect(yield* w.stored(stray)).toBe(true)
      const swept = yield* runGc(SETTINGS, false)
      expect(swept.content.freed).toMatchObject({ chunks: 1, objects: 1, bytes: 100, usedBytes: 0 })
      expect(yield* w.rows("chunks")).toEqual([used])
      expect(yield* w.stored(stray)).toBe(false)
      expect(yield* w.stored(used)).toBe(true)
    }))

  it.effect("a chunk uploaded again after its mark (a new grant) survives the sweep", () =>
    Effect.gen(function*() {
      const w = yield* world
      const c = h("again")
      yield* w.chunk(c)
      yield* w.grant(c, "2 hours")
      yield* runGc(SETTINGS, false)
      expect(yield* w.grants).toEqual([])
      yield* w.grant(c, "0 seconds")
      yield* w.passGrace
      const swept = yield* runGc(SETTINGS, false)
      expect(swept.content.freed.chunks).toBe(0)
      expect(swept.content.unmarked).toBe(1)
      expect(yield* w.rows("chunks")).toEqual([c])
      expect(yield* w.stored(c)).toBe(true)
      expect(yield* w.marks).toEqual([])
    }))

  it.effect("a blob published after its mark keeps itself and its chunk", () =>
    Effect.gen(function*() {
      const w = yield* world
      const [b, c] = [h("late blob"), h("late chunk")]
      yield* w.chunk(c)
      yield* w.blob(b, c)
      const first = yield* runGc(SETTINGS, false)
      expect(first.content.marked).toEqual({ blobs: 1, chunks: 1 })
      yield* w.publish(b)
      yield* w.passGrace
      const swept = yield* runGc(SETTINGS, false)
      expect(swept.content.freed).toMatchObject({ blobs: 0, chunks: 0 })
      expect(yield* w.rows("blobs")).toEqual([b])
      expect(yield* w.rows("chunks")).toEqual([c])
    }))

  it.effect("a repository deleted after a mark restarts the organization's marks", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const w = yield* world
      const c = h("restart")
      yield* w.chunk(c)
      yield* runGc(SETTINGS, false)
      yield* sql`UPDATE gc_marks SET marked_at = marked_at - interval '2 hours' WHERE org_id = ${w.orgId}`
      yield* sql`INSERT INTO audit_log (org_id, actor, action, target) VALUES (${w.orgId}, 'u', 'repo.delete', 'o/other')`
      expect((yield* runGc(SETTINGS, false)).content.freed.chunks).toBe(0)
      expect(yield* w.rows("chunks")).toEqual([c])
      yield* w.passGrace
      expect((yield* runGc(SETTINGS, false)).content.freed.chunks).toBe(1)
    }))

  it.effect("a pack stays while one chunk row reads it and goes with its last; the quota gets back what it counted", () =>
    Effect.gen(function*() {
      const w = yield* world
      const pack = h("pack")
      const [a, b, blob] = [h("in pack a"), h("in pack b"), h("blob of b")]
      yield* w.chunk(a, { pack, referenced: true })
      yield* w.chunk(b, { pack, referenced: true })
      yield* w.blob(blob, b)
      yield* w.publish(blob)
      yield* w.setUsed(200)
      yield* runGc(SETTINGS, false)
      yield* w.passGrace
      const first = yield* runGc(SETTINGS, false)
      expect(first.content.freed).toMatchObject({ chunks: 1, objects: 0, usedBytes: 100 })
      expect(yield* w.stored(pack)).toBe(true)
      expect(yield* w.used).toBe(100)
      const sql = yield* SqlClient.SqlClient
      yield* sql`DELETE FROM repo_blobs WHERE repo_id = ${w.repoId}`
      yield* runGc(SETTINGS, false)
      yield* w.passGrace
      const second = yield* runGc(SETTINGS, false)
      expect(second.content.freed).toMatchObject({ blobs: 1, chunks: 1, objects: 1, usedBytes: 100 })
      expect(yield* w.stored(pack)).toBe(false)
      expect(yield* w.used).toBe(0)
    }))

  it.effect("uploading an object again renews its old grant: it is not marked while the grant is fresh", () =>
    Effect.gen(function*() {
      const w = yield* world
      const objects = yield* ContentObjects
      const c = h("renewed")
      yield* w.chunk(c)
      yield* w.grant(c, "2 hours")
      yield* objects.recordUploads({ repoId: w.repoId, principal: "user:u" }, [c])
      expect((yield* runGc(SETTINGS, false)).content.marked).toEqual({ blobs: 0, chunks: 0 })
      expect(yield* w.grants).toEqual([c])
    }))

  it.effect("a deleted organization's namespaces (content and CI) are emptied once past the grace; others' and the releases' stay", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const store = yield* ObjectStore.ObjectStore
      const [gone, kept] = [yield* world, yield* world]
      const [pack, alone, log] = [h("gone pack"), h("gone alone"), h("gone log")]
      yield* gone.chunk(h("in pack"), { pack })
      yield* gone.chunk(alone)
      yield* store.put({ namespace: `ci-${gone.orgId}`, hash: log }, Stream.make(new Uint8Array([1])))
      yield* store.put({ namespace: "releases", hash: log }, Stream.make(new Uint8Array([1])))
      yield* kept.chunk(h("kept"))
      yield* sql`DELETE FROM repositories WHERE id = ${gone.repoId}`
      yield* sql`DELETE FROM organizations WHERE id = ${gone.orgId}`
      const record = sql`SELECT 1 FROM deleted_organizations WHERE org_id = ${gone.orgId}`
      expect(yield* record).toHaveLength(1)
      // within the grace: nothing goes
      expect((yield* runGc(SETTINGS, false)).content.freed).toMatchObject({ namespaces: 0, objects: 0 })
      expect([yield* gone.stored(pack), yield* record.pipe(Effect.map((r) => r.length))]).toEqual([true, 1])
      yield* sql`UPDATE deleted_organizations SET deleted_at = deleted_at - interval '2 hours' WHERE org_id = ${gone.orgId}`
      const dry = yield* runGc(SETTINGS, true)
      expect(dry.content.freed).toMatchObject({ namespaces: 2, objects: 0 })
      expect(yield* gone.stored(pack)).toBe(true)
      const run = yield* runGc(SETTINGS, false)
      expect(run.content.freed).toMatchObject({ namespaces: 2, objects: 3 })
      expect([yield* gone.stored(pack), yield* gone.stored(alone)]).toEqual([false, false])
      expect(yield* store.has({ namespace: `ci-${gone.orgId}`, hash: log })).toBe(false)
      expect(yield* store.has({ namespace: "releases", hash: log })).toBe(true)
      expect(yield* kept.stored(h("kept"))).toBe(true)
      expect((yield* store.namespaces).filter((n) => n.includes(gone.orgId))).toEqual([])
      expect(yield* record).toHaveLength(0)
      expect((yield* runGc(SETTINGS, false)).content.freed).toMatchObject({ namespaces: 0, objects: 0 })
    }))

  it.effect("a namespace of an organization this database never deleted stays (another installation's, a fresh database's)", () =>
    Effect.gen(function*() {
      const store = yield* ObjectStore.ObjectStore
      const stranger = randomUUID()
      const log = h("stranger log")
      yield* store.put({ namespace: stranger, hash: log }, Stream.make(new Uint8Array([1])))
      yield* store.put({ namespace: `ci-${stranger}`, hash: log }, Stream.make(new Uint8Array([1])))
      expect((yield* runGc(SETTINGS, false)).content.freed).toMatchObject({ namespaces: 0 })
      expect([yield* store.has({ namespace: stranger, hash: log }), yield* store.has({ namespace: `ci-${stranger}`, hash: log })])
        .toEqual([true, true])
    }))
  it.effect("a namespace gc could not delete keeps its organization's record; the next gc empties it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const store = yield* ObjectStore.ObjectStore
      const gone = yield* world
      yield* gone.chunk(h("failing"))
      yield* sql`DELETE FROM repositories WHERE id = ${gone.repoId}`
      yield* sql`DELETE FROM organizations WHERE id = ${gone.orgId}`
      yield* sql`UPDATE deleted_organizations SET deleted_at = deleted_at - interval '2 hours' WHERE org_id = ${gone.orgId}`
      const record = sql`SELECT 1 FROM deleted_organizations WHERE org_id = ${gone.orgId}`
      const failing = {
        ...store,
        deleteNamespace: () => Effect.fail(new ObjectStore.ObjectStoreError({ operation: "delete", reason: "Backend", message: "down" }))
      }
      yield* runGc(SETTINGS, false).pipe(Effect.provideService(ObjectStore.ObjectStore, failing))
      expect([yield* gone.stored(h("failing")), (yield* record).length]).toEqual([true, 1])
      expect((yield* runGc(SETTINGS, false)).content.freed).toMatchObject({ namespaces: 1, objects: 1 })
      expect([yield* gone.stored(h("failing")), (yield* record).length]).toEqual([false, 0])
    }))
})
