/**
 * The content tables' references (migration 0020: statement-level triggers instead of foreign keys on the push's hot
 * inserts) keep what the foreign keys guaranteed, on both databases: an insert naming a missing organization,
 * repository or blob fails; deleting an organization, a repository or a blob deletes the rows naming it (the
 * organization's user, a repository's delete, gc's sweep: whoever deletes); keys do not change. On PostgreSQL, a
 * delete concurrent with an insert leaves no orphan either way round (the insert locks the parents it names).
 * blob_chunks' rows are not checked on insert (0023): their one writer, registerBlobs, inserts them only with the
 * blob rows the same statement inserted.
 */
import { DbEmbedded, DbPostgres, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Ref } from "effect"
import { SqlClient } from "effect/sql"
import { SqlError } from "effect/sql/SqlError"
import { createHash, randomUUID } from "node:crypto"
import { startPostgres } from "../../../../scripts/infra/postgres.ts"

const Embedded = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Postgres = Migrations.layer.pipe(
  Layer.provideMerge(Layer.unwrap(Effect.map(startPostgres(), (server) => DbPostgres.layer({ url: server.url, maxConnections: 3 })))),
  Layer.orDie
)

const h = (label: string) => createHash("sha256").update(label).digest("hex")

/** The failure of a statement that broke a reference: what a foreign key's check raised (23503). */
const refused = <A, R>(effect: Effect.Effect<A, SqlError, R>) =>
  Effect.map(Effect.flip(effect), (error) => {
    expect(error).toBeInstanceOf(SqlError)
    expect(error.reason._tag).toBe("ConstraintError")
    return error
  })

/** An organization with a repository, a chunk, a one-chunk blob and its mapping, a tree, and the repository's rows. */
const world = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [orgId, repoId] = [randomUUID(), randomUUID()]
  const [blob, tree] = [h(`${orgId} blob`), h(`${orgId} tree`)]
  yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: `o${orgId.slice(0, 8)}`, name: "o" })}`
  yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: `r${repoId.slice(0, 8)}` })}`
  yield* sql`INSERT INTO chunks (org_id, hash, size) VALUES (${orgId}, ${blob}, 1)`
  yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) VALUES (${orgId}, ${blob}, 1, 1)`
  yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size) VALUES (${orgId}, ${blob}, 0, ${blob}, 0, 1)`
  yield* sql`INSERT INTO trees (org_id, hash, body) VALUES (${orgId}, ${tree}, '')`
  yield* sql`INSERT INTO repo_blobs (repo_id, blob_hash) VALUES (${repoId}, ${blob})`
  yield* sql`INSERT INTO repo_trees (repo_id, tree_hash) VALUES (${repoId}, ${tree})`
  yield* sql`INSERT INTO object_uploads (repo_id, principal, hash) VALUES (${repoId}, 'user:me', ${blob})`
  return { orgId, repoId, blob, tree }
})

/** How many rows each content table holds for the organization and its repository. */
const counts = (orgId: string, repoId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<Record<string, string>>`SELECT
      (SELECT count(*) FROM chunks WHERE org_id = ${orgId})::text AS chunks,
      (SELECT count(*) FROM blobs WHERE org_id = ${orgId})::text AS blobs,
      (SELECT count(*) FROM blob_chunks WHERE org_id = ${orgId})::text AS blob_chunks,
      (SELECT count(*) FROM trees WHERE org_id = ${orgId})::text AS trees,
      (SELECT count(*) FROM repo_blobs WHERE repo_id = ${repoId})::text AS repo_blobs,
      (SELECT count(*) FROM repo_trees WHERE repo_id = ${repoId})::text AS repo_trees,
      (SELECT count(*) FROM object_uploads WHERE repo_id = ${repoId})::text AS object_uploads`
    return Object.fromEntries(Object.entries(row!).map(([k, v]) => [k, Number(v)]))
  })

const all = (n: number) => ({ chunks: n, blobs: n, blob_chunks: n, trees: n, repo_blobs: n, repo_trees: n, object_uploads: n })

for (const [database, Database, options] of [["PGlite", Embedded, {}], ["PostgreSQL", Postgres, { excludeTestServices: true }]] as const) {
  layer(Database, { timeout: 120_000, ...options })(`content references on ${database}`, (it) => {
    it.effect("the five foreign keys are gone and their triggers are there (a misspelt DROP IF EXISTS is silent), but blob_chunks' insert check (0023); trees' and repo_trees' are keys again (0022)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tables = Object.keys(all(0))
        const keys = yield* sql<{ child: string; parent: string }>`SELECT c.relname AS child, p.relname AS parent
          FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid
          WHERE k.contype = 'f' AND c.relname IN ${sql.in(tables)}`
        const dropped = new Set(["chunks>organizations", "blobs>organizations", "blob_chunks>blobs", "repo_blobs>repositories",
          "object_uploads>repositories"])
        const restored = ["repo_trees>repositories", "trees>organizations"]
        const named = keys.map((k) => `${k.child}>${k.parent}`)
        expect(named.filter((k) => dropped.has(k))).toEqual([])
        expect(named.filter((k) => restored.includes(k)).sort()).toEqual(restored)
        const triggers = yield* sql<{ tgname: string }>`SELECT tgname FROM pg_trigger WHERE NOT tgisinternal`
        const names = new Set(triggers.map((t) => t.tgname))
        for (const key of dropped) {
          const [child, parent] = key.split(">")
          for (const name of [`${child}_parents`, `${parent}_delete_${child}`, `${child}_reference_fixed`]) {
            // 0023: blob_chunks' inserts are not checked (their one writer inserts them with their blobs).
            expect(names.has(name), name).toBe(name !== "blob_chunks_parents")
          }
        }
        for (const key of restored) {
          const [child, parent] = key.split(">")
          for (const name of [`${child}_parents`, `${parent}_delete_${child}`, `${child}_reference_fixed`]) {
            expect(names.has(name), name).toBe(false)
          }
        }
      }))

    it.effect("an insert naming a missing organization or repository fails, and inserts nothing", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { orgId, repoId } = yield* world
        const [ghost, hash] = [randomUUID(), h(randomUUID())]
        yield* refused(sql`INSERT INTO chunks (org_id, hash, size) VALUES (${ghost}, ${hash}, 1)`)
        yield* refused(sql`INSERT INTO blobs (org_id, hash, size, chunk_count) VALUES (${ghost}, ${hash}, 1, 1)`)
        yield* refused(sql`INSERT INTO trees (org_id, hash, body) VALUES (${ghost}, ${hash}, '')`)
        yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) VALUES (${orgId}, ${hash}, 1, 1)`
        yield* refused(sql`INSERT INTO repo_blobs (repo_id, blob_hash) VALUES (${ghost}, ${hash})`)
        yield* refused(sql`INSERT INTO repo_trees (repo_id, tree_hash) VALUES (${ghost}, ${hash})`)
        yield* refused(sql`INSERT INTO object_uploads (repo_id, principal, hash) VALUES (${ghost}, 'user:me', ${hash})`)
        const [orphans] = yield* sql<{ n: string }>`SELECT (
          (SELECT count(*) FROM chunks WHERE org_id = ${ghost}) + (SELECT count(*) FROM blobs WHERE org_id = ${ghost})
          + (SELECT count(*) FROM trees WHERE org_id = ${ghost}) + (SELECT count(*) FROM blob_chunks WHERE blob_hash = ${hash})
          + (SELECT count(*) FROM repo_blobs WHERE repo_id = ${ghost}) + (SELECT count(*) FROM repo_trees WHERE repo_id = ${ghost})
          + (SELECT count(*) FROM object_uploads WHERE repo_id = ${ghost}))::text AS n`
        expect(Number(orphans!.n)).toBe(0)
        expect(yield* counts(orgId, repoId)).toEqual({ ...all(1), blobs: 2 })
      }))

    /** Deletes from one world with `remove`; answers its counts after, and checks another world's rows stay. */
    const deleting = (remove: (w: Effect.Success<typeof world>) => Effect.Effect<unknown, SqlError, SqlClient.SqlClient>) =>
      Effect.gen(function*() {
        const w = yield* world
        const other = yield* world
        yield* remove(w)
        expect(yield* counts(other.orgId, other.repoId)).toEqual(all(1))
        return yield* counts(w.orgId, w.repoId)
      })

    it.effect("deleting a repository deletes what it reaches and its upload grants; the organization's objects stay", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* deleting((w) => sql`DELETE FROM repositories WHERE id = ${w.repoId}`)
        expect(rows).toEqual({ ...all(1), repo_blobs: 0, repo_trees: 0, object_uploads: 0 })
      }))

    it.effect("deleting a blob (gc's sweep) deletes its chunk mapping; its chunk stays", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* deleting((w) => sql`DELETE FROM blobs WHERE org_id = ${w.orgId} AND hash = ${w.blob}`)
        expect(rows).toEqual({ ...all(1), blobs: 0, blob_chunks: 0 })
      }))

    it.effect("deleting an organization deletes its chunks, blobs, their mappings and trees", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        // An organization goes without repositories (Organization.delete refuses otherwise).
        const rows = yield* deleting((w) =>
          Effect.andThen(sql`DELETE FROM repositories WHERE id = ${w.repoId}`, sql`DELETE FROM organizations WHERE id = ${w.orgId}`)
        )
        expect(rows).toEqual(all(0))
      }))

    it.effect("a personal organization going with its user (a foreign key's cascade) takes its content and is recorded deleted", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const userId = randomUUID()
        let orgId = ""
        const rows = yield* deleting((w) =>
          Effect.gen(function*() {
            orgId = w.orgId
            yield* sql`INSERT INTO users ${sql.insert({ id: userId, username: `u${userId.slice(0, 8)}` })}`
            yield* sql`UPDATE organizations SET personal_user_id = ${userId} WHERE id = ${w.orgId}`
            yield* sql`DELETE FROM repositories WHERE id = ${w.repoId}`
            yield* sql`DELETE FROM users WHERE id = ${userId}`
          })
        )
        expect(rows).toEqual(all(0))
        // gc empties the object-store namespaces of recorded organizations only (migration 0021)
        expect(yield* sql`SELECT 1 FROM deleted_organizations WHERE org_id = ${orgId}`).toHaveLength(1)
      }))

    it.effect("keys that rows of other tables name do not change", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { blob, orgId, repoId } = yield* world
        const other = yield* world
        yield* refused(sql`UPDATE chunks SET org_id = ${other.orgId} WHERE org_id = ${orgId}`)
        yield* refused(sql`UPDATE blob_chunks SET blob_hash = ${h("elsewhere")} WHERE org_id = ${orgId}`)
        yield* refused(sql`UPDATE repo_blobs SET repo_id = ${other.repoId} WHERE repo_id = ${repoId}`)
        yield* refused(sql`UPDATE blobs SET hash = ${h("renamed")} WHERE org_id = ${orgId} AND hash = ${blob}`)
        yield* refused(sql`UPDATE organizations SET id = ${randomUUID()} WHERE id = ${orgId}`)
        yield* refused(sql`UPDATE repositories SET id = ${randomUUID()} WHERE id = ${repoId}`)
        // Other columns change as before (the publish's mark, a repository moving to another organization).
        yield* sql`UPDATE chunks SET referenced = true WHERE org_id = ${orgId}`
        yield* sql`UPDATE repositories SET org_id = ${other.orgId} WHERE id = ${repoId}`
        expect(yield* counts(orgId, repoId)).toEqual(all(1))
      }))

    if (database === "PostgreSQL") {
      /** A blob inserted in one transaction while another deletes its organization, in either order. */
      const race = (deleteFirst: boolean) =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const { orgId, repoId } = yield* world
          yield* sql`DELETE FROM repositories WHERE id = ${repoId}`
          const [first, release] = [yield* Deferred.make<void>(), yield* Deferred.make<void>()]
          const secondDone = yield* Ref.make(false)
          const insert = sql`INSERT INTO blobs (org_id, hash, size, chunk_count) VALUES (${orgId}, ${h(`${orgId} new`)}, 1, 1)`
          const remove = sql`DELETE FROM organizations WHERE id = ${orgId}`
          // The first holds its transaction open after its statement; the second runs meanwhile, then the first commits.
          const holder = yield* sql.withTransaction(Effect.gen(function*() {
            yield* deleteFirst ? remove : insert
            yield* Deferred.succeed(first, undefined)
            yield* Deferred.await(release)
          })).pipe(Effect.forkChild)
          yield* Deferred.await(first)
          const second = yield* sql.withTransaction(deleteFirst ? insert : remove).pipe(
            Effect.exit,
            Effect.tap(() => Ref.set(secondDone, true)),
            Effect.forkChild
          )
          yield* Effect.sleep("500 millis")
          expect(yield* Ref.get(secondDone)).toBe(false)
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(holder)
          return { second: yield* Fiber.join(second), rows: yield* counts(orgId, repoId) }
        })

      it.effect("an insert holding its organization makes a concurrent delete wait, which then deletes what it inserted", () =>
        Effect.gen(function*() {
          const { rows, second } = yield* race(false)
          expect(second._tag).toBe("Success")
          expect(rows).toEqual(all(0))
        }))

      it.effect("an insert after an uncommitted delete of its organization waits for it, then fails", () =>
        Effect.gen(function*() {
          const { rows, second } = yield* race(true)
          expect(second._tag).toBe("Failure")
          expect(String(second)).toMatch(/does not exist|foreign key/)
          expect(rows).toEqual(all(0))
        }))
    }
  })
}
