/**
 * ContentObjects.present against a migrated in-memory database: a batch larger than one query's
 * slice (2,000 hashes) mixing objects a readable repository reaches, objects only an unreadable one
 * reaches, objects a restricted repository withholds or lets the caller read, and objects uploaded by
 * the caller, by someone else, or no longer stored keeps each object's own answer (dedup never grants).
 * registerBlobs: new blobs with their chunk rows, stored ones kept as they are.
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import * as Tree from "@grove/core/objects/Tree"
import { ContentObjects, type DedupScope } from "./ContentObjects.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Objects = ContentObjects.layer.pipe(Layer.provideMerge(Db))

const h = (label: string) => createHash("sha256").update(label).digest("hex")

layer(Objects, { timeout: 120_000 })("ContentObjects", (it) => {
  it.effect("answers each object of a mixed batch on its own, across slices", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const objects = yield* ContentObjects
      const orgId = randomUUID()
      const [written, readable, restricted, hidden] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()]
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "o", name: "o" })}`
      for (const [id, name] of [[written, "w"], [readable, "r"], [restricted, "p"], [hidden, "h"]] as const) {
        yield* sql`INSERT INTO repositories ${sql.insert({ id, org_id: orgId, name })}`
      }
      const blob = (hash: string) => sql`INSERT INTO blobs ${sql.insert({ org_id: orgId, hash, size: 1, chunk_count: 1 })}`
      const chunk = (hash: string) => sql`INSERT INTO chunks ${sql.insert({ org_id: orgId, hash, size: 1 })}`
      const maps = (blobHash: string, chunkHash: string) =>
        sql`INSERT INTO blob_chunks ${sql.insert({ org_id: orgId, blob_hash: blobHash, seq: 0, chunk_hash: chunkHash, byte_offset: 0, size: 1 })}`
      const reaches = (repoId: string, blobHash: string) => sql`INSERT INTO repo_blobs ${sql.insert({ repo_id: repoId, blob_hash: blobHash })}`
      const uploaded = (repoId: string, principal: string, hash: string) =>
        sql`INSERT INTO object_uploads ${sql.insert({ repo_id: repoId, principal, hash })}`

      // 2,100 blobs (and their chunks) the readable repository reaches: the batch spans two slices.
      const filler = Array.from({ length: 2100 }, (_, i) => h(`filler ${i}`))
      yield* sql`INSERT INTO blobs (org_id, hash, size, chunk_count) SELECT ${orgId}, unnest(${filler}::text[]), 1, 1`
      yield* sql`INSERT INTO chunks (org_id, hash, size) SELECT ${orgId}, unnest(${filler.map((f) => h(`c ${f}`))}::text[]), 1`
      yield* sql`INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size)
        SELECT ${orgId}, b, 0, 'c' || b, 0, 1 FROM unnest(${filler}::text[]) AS b`
      yield* sql`INSERT INTO repo_blobs (repo_id, blob_hash) SELECT ${readable}, unnest(${filler}::text[])`

      const named = {
        readable: h("readable"), onlyHidden: h("only hidden"), restrictedOk: h("restricted ok"), restrictedWithheld: h("withheld"),
        mine: h("mine"), mineGone: h("mine, not stored"), others: h("someone else's"), mineElsewhere: h("mine, unreadable repo"), unknown: h("unknown")
      }
      for (const b of [named.readable, named.onlyHidden, named.restrictedOk, named.restrictedWithheld, named.mine, named.others, named.mineElsewhere]) {
        yield* blob(b)
        yield* chunk(h(`chunk ${b}`))
        yield* maps(b, h(`chunk ${b}`))
      }
      yield* reaches(readable, named.readable)
      yield* reaches(hidden, named.onlyHidden)
      yield* reaches(restricted, named.restrictedOk)
      yield* reaches(restricted, named.restrictedWithheld)
      for (const b of [named.mine, named.mineGone]) yield* uploaded(written, "user:me", b)
      yield* uploaded(written, "user:me", h(`chunk ${named.mine}`))
      yield* uploaded(written, "user:other", named.others)
      yield* uploaded(hidden, "user:me", named.mineElsewhere)

      const scope: DedupScope = {
        orgId,
        repoId: written,
        principal: "user:me",
        readable: [written, readable, restricted],
        restricted: [{ repoId: restricted, canRead: () => false, readableBlobs: Effect.succeed(new Set([named.restrictedOk])) }]
      }
      // The named ones sit on both sides of the slice boundary.
      const blobs = [...filler.slice(0, 1995), ...Object.values(named), ...filler.slice(1995)]
      const present = yield* objects.present("blob", scope, blobs)
      expect(new Set([...present].filter((b) => !filler.includes(b)))).toEqual(new Set([named.readable, named.restrictedOk, named.mine]))
      expect(filler.every((f) => present.has(f))).toBe(true)

      const chunkOf = (b: string) => h(`chunk ${b}`)
      const chunks = yield* objects.present("chunk", scope, [...filler.map((f) => `c${f}`), ...Object.values(named).map(chunkOf)])
      expect(new Set(Object.values(named).map(chunkOf).filter((c) => chunks.has(c)))).toEqual(
        new Set([named.readable, named.restrictedOk, named.mine].map(chunkOf))
      )
      expect(filler.every((f) => chunks.has(`c${f}`))).toBe(true)

      // Trees are sent whole to every reader: a restricted repository's trees count, an unreadable one's do not.
      const [inRestricted, inHidden, myTree] = [h("tree p"), h("tree h"), h("tree mine")]
      for (const t of [inRestricted, inHidden, myTree]) yield* sql`INSERT INTO trees ${sql.insert({ org_id: orgId, hash: t, body: "" })}`
      yield* sql`INSERT INTO repo_trees ${sql.insert({ repo_id: restricted, tree_hash: inRestricted })}`
      yield* sql`INSERT INTO repo_trees ${sql.insert({ repo_id: hidden, tree_hash: inHidden })}`
      yield* uploaded(written, "user:me", myTree)
      expect(yield* objects.present("tree", scope, [inRestricted, inHidden, myTree, named.unknown])).toEqual(new Set([inRestricted, myTree]))
    }))

  it.effect("registerBlobs writes each new blob with its chunk rows in order, in one statement; a stored blob keeps its own", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const objects = yield* ContentObjects
      const orgId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "reg", name: "reg" })}`
      const kept = { hash: h("kept"), size: 3, chunks: [{ hash: h("kept c0"), offset: 0, size: 3 }] }
      yield* objects.registerBlobs(orgId, [kept])
      const many = Array.from({ length: 5001 }, (_, i) => ({ hash: h(`many ${i}`), size: 2, chunks: [{ hash: h(`many c ${i}`), offset: 0, size: 2 }] }))
      const split = { hash: h("split"), size: 10, chunks: [0, 1, 2].map((i) => ({ hash: h(`split c${i}`), offset: i * 4, size: i === 2 ? 2 : 4 })) }
      const empty = { hash: h("empty"), size: 0, chunks: [] }
      // `kept` again with other chunks: its stored rows stay; the 5,001 blobs span two statements.
      yield* objects.registerBlobs(orgId, [...many, split, empty, { ...kept, chunks: [{ hash: h("other"), offset: 0, size: 3 }] }])
      const info = yield* objects.blobInfo(orgId, [kept.hash, split.hash, many[0]!.hash, many[5000]!.hash])
      expect(info.get(kept.hash)).toEqual(kept)
      expect(info.get(split.hash)).toEqual(split)
      expect(info.get(many[5000]!.hash)).toEqual(many[5000])
      const sizes = yield* objects.blobSizes(orgId, [empty.hash, ...many.map((b) => b.hash)])
      expect(sizes.size).toBe(5002)
      expect(sizes.get(empty.hash)).toBe(0)
      const [count] = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM blob_chunks WHERE org_id = ${orgId}`
      expect(Number(count!.n)).toBe(1 + 5001 + 3)
    }))

  it.effect("storeTrees and recordUploads write any body and any number of rows as arrays", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const objects = yield* ContentObjects
      const orgId = randomUUID()
      const repoId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "trees", name: "trees" })}`
      yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "t" })}`
      const names = ['a "quoted", {braced} name', "NULL", "back\\slash", "é ü 日本", " spaced "]
      const entries = names.map((name) => ({ name, kind: "blob" as const, hash: h(name), mode: "regular" as const }))
      const trees = [
        { hash: Tree.hashTree([]), body: "" },
        { hash: Tree.hashTree(entries), body: Tree.encodeTree(entries) },
        ...Array.from({ length: 5001 }, (_, i) => {
          const one = [{ name: `f${i}`, kind: "blob" as const, hash: h(`f${i}`), mode: "regular" as const }]
          return { hash: Tree.hashTree(one), body: Tree.encodeTree(one) }
        })
      ]
      yield* objects.storeTrees(orgId, trees)
      yield* objects.storeTrees(orgId, trees.slice(0, 2))
      const loaded = yield* objects.loadTrees(orgId, trees.map((t) => t.hash))
      expect(loaded.size).toBe(trees.length)
      expect(loaded.get(Tree.hashTree([]))).toEqual([])
      expect(loaded.get(Tree.hashTree(entries))).toEqual(Tree.sortEntries(entries))

      const scope = { repoId, principal: "user:me" }
      yield* objects.recordUploads(scope, trees.map((t) => t.hash))
      yield* objects.recordUploads(scope, [trees[0]!.hash])
      const [count] = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM object_uploads WHERE repo_id = ${repoId} AND principal = 'user:me'`
      expect(Number(count!.n)).toBe(trees.length)
    }))

  it.effect("recordUploads leaves a fresh grant as it is (no row lock), renews an old one and grants a new one", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const objects = yield* ContentObjects
      const orgId = randomUUID()
      const repoId = randomUUID()
      const other = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "grants", name: "grants" })}`
      for (const [id, name] of [[repoId, "g"], [other, "o"]] as const) yield* sql`INSERT INTO repositories ${sql.insert({ id, org_id: orgId, name })}`
      const [fresh, old, fresh2, mine] = [h("fresh"), h("old"), h("fresh2"), h("mine")] as const
      const scope = { repoId, principal: "user:me" }
      yield* objects.recordUploads(scope, [fresh, old, fresh2])
      // Granted elsewhere only (another repository, another caller): this repository's grant is still new.
      yield* objects.recordUploads({ repoId: other, principal: "user:me" }, [mine])
      yield* objects.recordUploads({ repoId, principal: "user:other" }, [mine])
      yield* sql`UPDATE object_uploads SET created_at = now() - interval '11 minutes' WHERE repo_id = ${repoId} AND hash = ${old}`
      yield* sql`VACUUM object_uploads`.unprepared
      const rows = () =>
        sql<{ hash: string; locked: boolean; created: string; age: number }>`SELECT hash, xmax::text <> '0' AS locked,
          created_at::text AS created, extract(epoch FROM now() - created_at)::float8 AS age FROM object_uploads WHERE repo_id = ${repoId} AND principal = 'user:me'`.pipe(
          Effect.map((rs) => new Map(rs.map((r) => [r.hash, r])))
        )
      const before = yield* rows()
      expect([...before.values()].map((r) => r.locked)).toEqual([false, false, false])

      yield* objects.recordUploads(scope, [fresh, old, fresh2, mine])
      const after = yield* rows()
      // On the old code the fresh grants' rows were locked (xmax set) by ON CONFLICT DO UPDATE, for nothing.
      for (const hash of [fresh, fresh2]) {
        expect(after.get(hash)!.locked).toBe(false)
        expect(after.get(hash)!.created).toBe(before.get(hash)!.created)
      }
      expect(after.get(old)!.age).toBeLessThan(60)
      expect(after.has(mine)).toBe(true)
    }))

  it.effect("a tree a rolled-back transaction stored or read is not remembered: later loads do not find it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const objects = yield* ContentObjects
      const orgId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "rolled", name: "rolled" })}`
      const tree = (name: string) => {
        const entries = [{ name, kind: "blob" as const, hash: h(name), mode: "regular" as const }]
        return { hash: Tree.hashTree(entries), body: Tree.encodeTree(entries), entries }
      }
      const [stored, read, kept] = [tree("stored"), tree("read"), tree("kept")]
      const rolledBack = Effect.gen(function*() {
        yield* objects.storeTrees(orgId, [stored])
        yield* sql`INSERT INTO trees ${sql.insert({ org_id: orgId, hash: read.hash, body: read.body })}`
        const inside = yield* objects.loadTrees(orgId, [stored.hash, read.hash])
        expect(inside.size).toBe(2)
        return yield* Effect.fail("roll back" as const)
      })
      expect(yield* sql.withTransaction(rolledBack).pipe(Effect.flip)).toBe("roll back")
      expect((yield* objects.loadTrees(orgId, [stored.hash, read.hash])).size).toBe(0)

      // Committed, they are found (and kept) as before.
      yield* sql.withTransaction(objects.storeTrees(orgId, [kept]))
      expect((yield* objects.loadTrees(orgId, [kept.hash])).get(kept.hash)).toEqual(kept.entries)
    }))
})
