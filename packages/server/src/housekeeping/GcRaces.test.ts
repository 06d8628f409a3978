/**
 * gc against pushes and uploads that race with it, on PostgreSQL (its own server: transactions really
 * interleave) and on the embedded PGlite (one connection: a transaction runs whole between statements).
 * Each window is forced, not waited for by luck: gc runs with grace 0 between a push's preparation and
 * its publish; a sweep is held open (its object store's delete waits on a gate) while the same bytes are
 * uploaded again; a publishing transaction is held open while a sweep runs. The push is prepared and
 * published by the real code (PushPreparation, the Branch entity's Push handler in a transaction).
 */
import { Outbox } from "@grove/bus"
import type { Entity } from "@grove/bus"
import { DbEmbedded, DbPostgres, Migrations, ObjectStore, ObjectStoreLocal } from "@grove/storage"
import { tempDirectory } from "@grove/storage/TempDirectory.testing"
import { expect, layer, type Vitest } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { startPostgres } from "../../../../scripts/infra/postgres.ts"
import { buildCommit, type Files, pushBody } from "../../../../test/support/content.ts"
import { publishPrepared, push } from "../content/BranchCommands.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { storeUploaded } from "../content/ChunkUploads.ts"
import { repositoryRows } from "../entities/Commands.testing.ts"
import { ContentObjects, type DedupScope } from "../content/ContentObjects.ts"
import { preparePush } from "../content/PushPreparation.ts"
import { runGc } from "./GcRun.ts"

const NOW = { graceMs: 0, retention: {} }

/** While set, the object store's deletes (gc's sweep, inside its transaction) wait for `release`. */
let gate: { readonly reached: Deferred.Deferred<void>; readonly release: Deferred.Deferred<void> } | undefined

/** Each build of the store (one per database) gets its own root under this one, removed after the file. */
const storesRoot = tempDirectory("grove-gc-races-")
const GatedStore = Layer.effect(
  ObjectStore.ObjectStore,
  Effect.gen(function*() {
    const inner = yield* ObjectStoreLocal.make({ root: fs.mkdtempSync(path.join(storesRoot, "store-")) })
    return ObjectStore.ObjectStore.of({
      ...inner,
      delete: (key) =>
        Effect.suspend(() =>
          gate === undefined ? inner.delete(key) : Deferred.succeed(gate.reached, undefined).pipe(
            Effect.andThen(Deferred.await(gate.release)),
            Effect.andThen(inner.delete(key))
          )
        )
    })
  })
).pipe(Layer.orDie)

const Postgres = Layer.unwrap(Effect.map(startPostgres(), (server) => DbPostgres.layer({ url: server.url, maxConnections: 6 })))

const services = (db: Layer.Layer<SqlClient.SqlClient, unknown>) => {
  const Db = Migrations.layer.pipe(Layer.provideMerge(db), Layer.orDie)
  const Store = GatedStore
  return Layer.mergeAll(ContentObjects.layer, ChunkStore.layer).pipe(Layer.provideMerge(Layer.merge(Db, Store)))
}

/** One organization and repository, a caller, and the steps of a push. */
const world = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const store = yield* ObjectStore.ObjectStore
  const chunkStore = yield* ChunkStore
  const slug = `o${randomUUID().slice(0, 8)}`
  const { orgId, repoId } = yield* repositoryRows(slug)
  const scope: DedupScope = { orgId, repoId, principal: "user:u", readable: [repoId], restricted: [] }
  const outbox = Outbox.forCommand({ partition: 0, key: `${slug}/r`, onRow: () => {} })
  return {
    orgId,
    scope,
    /** A push's preparation as the sync handler does it: checked, objects stored, commits staged, object list staged. */
    prepare: (branch: string, files: Files, blobs?: ReturnType<typeof pushBody>["blobs"]) =>
      Effect.gen(function*() {
        const built = buildCommit({ branch, files })
        const body = pushBody({ branch, commits: [built], ...(blobs === undefined ? {} : { blobs }) })
        const prepared = yield* preparePush({ id: repoId, orgId }, body as never, scope)
        const stagedId = yield* (yield* ContentObjects).stagePush(repoId, { trees: prepared.newTrees, blobs: prepared.newBlobs })
        return { branch, body, prepared, stagedId, built }
      }),
    /** The Branch entity's Push command, in its own transaction, as the entity runtime runs it. */
    publish: (p: { branch: string; body: ReturnType<typeof pushBody>; stagedId: string; prepared: { commits: ReadonlyArray<string>; tip: string | null } }) =>
      sql.withTransaction(push({
        stagedId: p.stagedId,
        commits: p.prepared.commits,
        tip: p.prepared.tip,
        force: false,
        branch: p.body.branch as never,
        actor: "u"
      }, { entityId: `${slug}/r:${p.branch}`, commandId: randomUUID(), entityType: "Branch", command: "Push", partition: 0 } as Entity.CommandContext))
        .pipe(Effect.provideService(Outbox.Outbox, outbox)),
    head: (branch: string) =>
      sql<{ head: string | null }>`SELECT head FROM branches WHERE repo_id = ${repoId} AND name = ${branch}`.pipe(Effect.map((r) => r[0]?.head ?? null)),
    reached: sql<{ hash: string }>`SELECT blob_hash AS hash FROM repo_blobs WHERE repo_id = ${repoId}`.pipe(Effect.map((r) => r.map((x) => x.hash))),
    has: (table: "blobs" | "chunks", hash: string) =>
      sql<{ n: string }>`SELECT count(*)::text AS n FROM ${sql(table)} WHERE org_id = ${orgId} AND hash = ${hash}`.pipe(Effect.map((r) => r[0]?.n === "1")),
    /** The bytes of a chunk, read back through its row (alone or in a pack). */
    bytes: (hash: string) => Stream.runCollect(chunkStore.read(orgId, hash)).pipe(Effect.map((parts) => Buffer.concat([...parts]).toString())),
    stored: (hash: string) => store.has({ namespace: orgId, hash })
  }
})

const bytesOf = (text: string) => new TextEncoder().encode(text)
const blobHashOf = (built: ReturnType<typeof buildCommit>, file: string) => built.snapshot.get(file)!.hash

/** The tests both databases run: the command held past the grace, and a publish that still finds its rows. */
type Services = ChunkStore | ContentObjects | ObjectStore.ObjectStore | SqlClient.SqlClient
const sequentialCases = (it: Vitest.MethodsNonLive<Services>) => {
  it.effect("a push whose command runs after gc swept what it prepared is refused, retryably, and nothing is published", () =>
    Effect.gen(function*() {
      const w = yield* world
      const pending = yield* w.prepare("held", { "a.txt": "held on the bus" })
      const blob = blobHashOf(pending.built, "a.txt")
      // Grace 0: the first run drops the push's object list and marks its objects, the second sweeps them.
      yield* runGc(NOW, false)
      yield* runGc(NOW, false)
      expect(yield* w.has("blobs", blob)).toBe(false)
      expect(yield* w.has("chunks", blob)).toBe(false)
      const refused = yield* Effect.flip(w.publish(pending))
      expect(refused._tag).toBe("ObjectsMissing")
      expect(yield* w.head("held")).toBeNull()
      expect(yield* w.reached).toEqual([])
      // Pushing again stores the objects again, and it lands.
      const again = yield* w.prepare("held", { "a.txt": "held on the bus" })
      expect((yield* w.publish(again)).success).toBe(true)
      expect(yield* w.reached).toEqual([blob])
      expect(yield* w.bytes(blob)).toBe("held on the bus")
    }))

  /** A chunk deleted under a prepared push (as if by a sweep that checked before the push staged its list). */
  const sweptUnder = (marked: boolean) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const w = yield* world
      // lockReferenced counts stored rows without asking gc_marks per row only when the organization has no mark.
      if (marked) {
        for (const kind of ["blob", "chunk"]) {
          yield* sql`INSERT INTO gc_marks (org_id, kind, hash) VALUES (${w.orgId}, ${kind}, ${"0".repeat(64)})`
        }
      }
      const pending = yield* w.prepare("gone", { "g.txt": "swept under the push" })
      const blob = blobHashOf(pending.built, "g.txt")
      yield* sql`DELETE FROM chunks WHERE org_id = ${w.orgId} AND hash = ${blob}`
      const refused = yield* Effect.flip(w.publish(pending))
      expect(refused._tag).toBe("ObjectsMissing")
      expect(yield* w.head("gone")).toBeNull()
      const fine = yield* w.prepare("fine", { "f.txt": "kept" })
      expect((yield* w.publish(fine)).success).toBe(true)
    })

  it.effect("a publish whose object list is intact but whose blob a sweep deleted is refused; intact objects publish", () =>
    sweptUnder(false))

  it.effect("the same with gc's marks in the organization (on other objects): a missing chunk is still found, intact objects publish", () =>
    sweptUnder(true))

  it.effect("a chunk swept between its upload's store and its grant is stored again (recordChunkUploads sees it gone)", () =>
    Effect.gen(function*() {
      const w = yield* world
      const chunks = yield* ChunkStore
      const objects = yield* ContentObjects
      const data = bytesOf("uploaded twice")
      const hash = blobHashOf(buildCommit({ branch: "x", files: { "u.txt": data } }), "u.txt")
      yield* storeUploaded(w.orgId, w.scope, [{ hash, data }])
      yield* runGc(NOW, false)
      // The second upload's store finds the row and writes nothing; a sweep then deletes it before the grant.
      yield* chunks.putMany(w.orgId, [{ hash, data }])
      yield* runGc(NOW, false)
      expect(yield* w.has("chunks", hash)).toBe(false)
      expect([...(yield* objects.recordChunkUploads(w.scope, w.orgId, [hash]))]).toEqual([hash])
      // What the upload route runs: stored again, granted, readable.
      yield* storeUploaded(w.orgId, w.scope, [{ hash, data }])
      expect(yield* w.has("chunks", hash)).toBe(true)
      expect(yield* w.bytes(hash)).toBe("uploaded twice")
    }))
}

/**
 * A chunk stored and granted, then marked (grace 0), and `more` run (e.g. its blob registered); then a sweep of it held
 * open inside its transaction, its rows deleted and locked, before the object goes. `release` lets the sweep finish.
 */
const heldSweep = <R = never>(w: Effect.Success<typeof world>, text: string, file: string, more: (hash: string, data: Uint8Array) => Effect.Effect<unknown, unknown, R> = () => Effect.void) =>
  Effect.gen(function*() {
    const data = bytesOf(text)
    const hash = blobHashOf(buildCommit({ branch: "x", files: { [file]: data } }), file)
    yield* storeUploaded(w.orgId, w.scope, [{ hash, data }])
    yield* more(hash, data)
    yield* runGc(NOW, false)
    const held = { reached: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
    gate = held
    const sweep = yield* Effect.forkChild(runGc(NOW, false))
    yield* Deferred.await(held.reached)
    const release = Effect.gen(function*() {
      gate = undefined
      yield* Deferred.succeed(held.release, undefined)
      yield* Fiber.join(sweep)
    })
    return { data, hash, release }
  })

/** Runs a test that may set the gate; a failing one leaves no gate behind for the next. */
const gated = <A, E, R>(test: Effect.Effect<A, E, R>) => Effect.ensuring(test, Effect.sync(() => void (gate = undefined)))

/** Polls until `done` holds (bounded: generous for a loaded machine). */
const until = <R>(label: string, done: Effect.Effect<boolean, unknown, R>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 60_000
    while (!(yield* done)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${label}`))
      yield* Effect.sleep("20 millis")
    }
  })

/** A backend of this database waits on a lock. */
const someoneWaits = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ n: string }>`SELECT count(*)::text AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
  .pipe(Effect.map((r) => r[0]?.n !== "0"))

layer(services(Postgres), { timeout: 300_000, excludeTestServices: true })("gc races on PostgreSQL", (it) => {
  sequentialCases(it)

  it.effect("an upload while a sweep deleting the same chunk is open waits for it, then stores the chunk again", () =>
    gated(Effect.gen(function*() {
      const w = yield* world
      const { data, hash, release } = yield* heldSweep(w, "re-sent while swept", "s.txt")
      const upload = yield* Effect.forkChild(storeUploaded(w.orgId, w.scope, [{ hash, data }]))
      // Either the upload answered while the sweep is open (the window) or it waits on the sweep's lock.
      yield* until("the upload to finish or wait on a lock", Effect.map(Effect.zip(someoneWaits, Effect.sync(() => upload.pollUnsafe() !== undefined)), ([waits, done]) => waits || done))
      yield* release
      yield* Fiber.join(upload)
      // The upload's answer holds: the chunk is stored, and a push of it lands and reads back.
      expect(yield* w.has("chunks", hash)).toBe(true)
      expect(yield* w.stored(hash)).toBe(true)
      const pending = yield* w.prepare("after", { "s.txt": data }, [{ hash, content: [], size: data.length, chunks: [{ hash, offset: 0, size: data.length }] }])
      expect((yield* w.publish(pending)).success).toBe(true)
      expect(yield* w.bytes(hash)).toBe("re-sent while swept")
    })))

  it.effect("a push prepared while a sweep deletes its blob is refused at publish, not published dangling", () =>
    gated(Effect.gen(function*() {
      const w = yield* world
      const objects = yield* ContentObjects
      // A blob and chunk stored, then marked (grace 0) with their grants revoked.
      const { data, hash, release } = yield* heldSweep(w, "prepared under a sweep", "p.txt", (hash, data) =>
        objects.registerBlobs(w.orgId, [{ hash, size: data.length, chunks: [{ hash, offset: 0, size: data.length }] }]))
      // The sweep has deleted the rows but not committed: a preparation still sees them, and is granted them anew.
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO object_uploads (repo_id, principal, hash) VALUES (${w.scope.repoId}, ${w.scope.principal}, ${hash})`
      const pending = yield* w.prepare("under", { "p.txt": data }, [{ hash, content: [], size: data.length, chunks: [{ hash, offset: 0, size: data.length }] }])
      yield* release
      expect(yield* w.has("chunks", hash)).toBe(false)
      const refused = yield* Effect.flip(w.publish(pending))
      expect(refused._tag).toBe("ObjectsMissing")
      expect(yield* w.head("under")).toBeNull()
    })))

  it.effect("a sweep skips rows a publishing transaction holds, and they stay once it commits", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const w = yield* world
      const objects = yield* ContentObjects
      const data = bytesOf("published while swept")
      const hash = blobHashOf(buildCommit({ branch: "x", files: { "q.txt": data } }), "q.txt")
      yield* storeUploaded(w.orgId, w.scope, [{ hash, data }])
      yield* objects.registerBlobs(w.orgId, [{ hash, size: data.length, chunks: [{ hash, offset: 0, size: data.length }] }])
      yield* runGc(NOW, false)
      yield* sql`DELETE FROM object_uploads WHERE hash = ${hash}`
      const repo = { id: w.scope.repoId, orgId: w.orgId, owner: "o", name: "r" } as never
      const locked = yield* Deferred.make<void>()
      const commit = yield* Deferred.make<void>()
      const publishing = yield* Effect.forkChild(sql.withTransaction(Effect.gen(function*() {
        yield* publishPrepared(repo, { trees: [], blobs: [hash] })
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(commit)
      })))
      yield* Deferred.await(locked)
      const sweep = yield* Effect.forkChild(runGc(NOW, false))
      yield* until("the sweep to finish or wait on a lock", Effect.map(Effect.zip(someoneWaits, Effect.sync(() => sweep.pollUnsafe() !== undefined)), ([waits, done]) => waits || done))
      yield* Deferred.succeed(commit, undefined)
      yield* Fiber.join(publishing)
      yield* Fiber.join(sweep)
      expect(yield* w.has("blobs", hash)).toBe(true)
      expect(yield* w.has("chunks", hash)).toBe(true)
      expect(yield* w.stored(hash)).toBe(true)
      // Reached now: the next run drops the marks and frees nothing.
      yield* runGc(NOW, false)
      expect(yield* w.has("blobs", hash)).toBe(true)
      expect(yield* w.has("chunks", hash)).toBe(true)
    }))
})

layer(services(DbEmbedded.layer({})), { timeout: 300_000, excludeTestServices: true })("gc races on PGlite", (it) => {
  sequentialCases(it)

  it.effect("transactions do not interleave: a statement waits for a sweep held open, then sees its deletions", () =>
    gated(Effect.gen(function*() {
      const w = yield* world
      const { data, hash, release } = yield* heldSweep(w, "embedded", "e.txt")
      const upload = yield* Effect.forkChild(storeUploaded(w.orgId, w.scope, [{ hash, data }]))
      yield* Effect.sleep("200 millis")
      // Not an assertion on time: the upload cannot have finished, since its first statement waits for the connection.
      expect(upload.pollUnsafe()).toBeUndefined()
      yield* release
      expect(Exit.isSuccess(yield* Fiber.await(upload))).toBe(true)
      expect(yield* w.has("chunks", hash)).toBe(true)
      expect(yield* w.bytes(hash)).toBe("embedded")
    })))
})
