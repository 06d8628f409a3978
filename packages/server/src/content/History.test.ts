/**
 * History.ancestry against a migrated in-memory database: every ancestor of the heads asked for, and
 * after the first call only what was published since is fetched (the node keeps the edges).
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { ContentObjects } from "./ContentObjects.ts"
import { History } from "./History.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Services = History.layer.pipe(Layer.provideMerge(ContentObjects.layer), Layer.provideMerge(Db))

const h = (c: string) => c.repeat(64)

layer(Services, { timeout: 120_000 })("History.ancestry", (it) => {
  it.effect("answers every ancestor of the heads, then fetches only commits published since", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const history = yield* History
      const orgId = randomUUID()
      const repoId = randomUUID()
      yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "o", name: "o" })}`
      yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
      const commit = (hash: string, parent: string | null, mergeParent: string | null, published = true) =>
        sql`INSERT INTO commits ${
          sql.insert({
            repo_id: repoId, hash, branch_name: "main", parent_hash: parent, merge_parent_hash: mergeParent,
            manifest_hash: h("e"), author: "t", timestamp: "2026-11-26T00:00:00+00:00", files: "[]", published
          })
        }`
      yield* commit(h("1"), null, null)
      yield* commit(h("2"), h("1"), null)
      yield* commit(h("3"), h("2"), null)
      const first = yield* history.ancestry(repoId, [h("3")])
      expect([...first.keys()].sort()).toEqual([h("1"), h("2"), h("3")])
      expect(first.get(h("3"))).toEqual([h("2")])

      // Published since: a branch commit off 1, and a squash commit on 3 whose merge parent it is.
      yield* commit(h("b"), h("1"), null)
      yield* commit(h("4"), h("3"), h("b"))
      yield* commit(h("u"), h("4"), null, false)
      // The edges already known are not read again: a row gone from the table is still answered from them.
      yield* sql`DELETE FROM commits WHERE repo_id = ${repoId} AND hash = ${h("2")}`
      const later = yield* history.ancestry(repoId, [h("4"), h("u")])
      expect(later.get(h("4"))).toEqual([h("3"), h("b")])
      expect(later.get(h("b"))).toEqual([h("1")])
      expect(later.get(h("2"))).toEqual([h("1")])
      // Unpublished commits are not part of the history.
      expect(later.has(h("u"))).toBe(false)
    }))
})
