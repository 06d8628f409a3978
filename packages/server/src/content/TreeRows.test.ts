/**
 * TreeRows.storeTreesWithCommit against a migrated in-memory database, on a counted connection: a few trees
 * and the commit row are one statement; more trees than one slice (BATCH) are written a slice at a time, all
 * of them, with the commit row in the last; trees and a commit row stored before are kept as they were.
 */
import { ApiSync } from "@grove/api"
import { expect, layer } from "@effect/vitest"
import { Migrations } from "@grove/storage"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"
import { BATCH } from "../db/Batches.ts"
import { repositoryRows } from "../entities/Commands.testing.ts"
import { countedDatabase } from "../db/CountedDatabase.testing.ts"
import * as TreeRows from "./TreeRows.ts"

const { traffic, layer: Counted } = countedDatabase()
const Db = Migrations.layer.pipe(Layer.provideMerge(Counted), Layer.orDie)

const h = (label: string) => createHash("sha256").update(label).digest("hex")

const fileOf = (label: string) =>
  ApiSync.toFileChangeData({ path: `${label}.txt`, change_type: "add", old_blob_hash: null, new_blob_hash: h(`blob ${label}`) })

const commitOf = (repoId: string, label: string): TreeRows.CommitRowInsert => ({
  repoId,
  hash: h(`commit ${label}`),
  fields: {
    branch_name: "feature",
    parent_hash: null,
    merge_parent_hash: null,
    manifest_hash: h(`root ${label}`),
    author: "t",
    message: label,
    timestamp: 1_700_000_000_000_000_000n
  },
  files: [fileOf(label)]
})

const statementsDuring = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const before = traffic.statements.length
    const value = yield* effect
    return { value, statements: traffic.statements.slice(before) }
  })

layer(Db, { timeout: 120_000 })("TreeRows.storeTreesWithCommit", (it) => {
  it.effect("writes a few trees and the commit row in one statement", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { orgId, repoId } = yield* repositoryRows("few")
      const trees = ["b", "a", "c"].map((label) => ({ hash: h(`few ${label}`), body: `body ${label}` }))
      const { value, statements } = yield* statementsDuring(TreeRows.storeTreesWithCommit(orgId, trees, commitOf(repoId, "few")))
      expect(statements).toHaveLength(1)
      expect(value).toEqual(trees.map((t) => t.hash).sort())
      const stored = yield* sql<{ hash: string; body: string }>`SELECT hash, body FROM trees WHERE org_id = ${orgId} ORDER BY hash`
      expect(stored).toEqual([...trees].sort((x, y) => x.hash < y.hash ? -1 : 1))
      const commits = yield* sql<{ message: string; published: boolean; files: unknown }>`SELECT message, published, files FROM commits WHERE repo_id = ${repoId}`
      expect(commits).toEqual([{ message: "few", published: false, files: [fileOf("few")] }])
    }))

  it.effect("writes more trees than one slice a slice at a time, the commit row with the last", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { orgId, repoId } = yield* repositoryRows("many")
      const count = 2 * BATCH + 7
      const trees = Array.from({ length: count }, (_, i) => ({ hash: h(`many ${i}`), body: `body ${i}` }))
      const { statements } = yield* statementsDuring(TreeRows.storeTreesWithCommit(orgId, trees, commitOf(repoId, "many")))
      expect(statements).toHaveLength(3)
      expect(statements.filter((s) => s.includes("INSERT INTO commits"))).toEqual([statements[2]])
      expect(yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM trees WHERE org_id = ${orgId}`).toEqual([{ n: count }])
      expect(yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM commits WHERE repo_id = ${repoId}`).toEqual([{ n: 1 }])
    }))

  it.effect("keeps trees and a commit row stored before as they were", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { orgId, repoId } = yield* repositoryRows("again")
      const trees = [{ hash: h("again 1"), body: "first" }]
      yield* TreeRows.storeTreesWithCommit(orgId, trees, commitOf(repoId, "again"))
      yield* sql`UPDATE commits SET published = true WHERE repo_id = ${repoId}`
      yield* TreeRows.storeTreesWithCommit(orgId, [{ hash: h("again 1"), body: "second" }, { hash: h("again 2"), body: "new" }], {
        ...commitOf(repoId, "again"),
        files: []
      })
      const stored = yield* sql<{ body: string }>`SELECT body FROM trees WHERE org_id = ${orgId} ORDER BY body`
      expect(stored.map((r) => r.body)).toEqual(["first", "new"])
      const commits = yield* sql<{ published: boolean; files: unknown }>`SELECT published, files FROM commits WHERE repo_id = ${repoId}`
      expect(commits).toEqual([{ published: true, files: [fileOf("again")] }])
    }))
})
