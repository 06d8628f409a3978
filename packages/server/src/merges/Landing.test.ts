/**
 * The compare-and-set of the Repository entity's Merge, Sync and Revert commands, run directly
 * against a migrated in-memory database (PGlite): a head that moved between planning and landing
 * answers main_moved / branch_moved and leaves every row as it was; the expected heads land.
 */
import { Outbox } from "@grove/bus"
import { DbEmbedded, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { merge } from "./MergeCommand.ts"
import { revert, sync } from "./SyncRevertCommands.ts"
import { commandContext, recordingOutbox, runCommand } from "../entities/Commands.testing.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)

const { events, layer: TestOutbox } = recordingOutbox()
const context = (entityId: string) => commandContext("Repository", entityId)

const h = (c: string) => c.repeat(64)

/** An organization, a repository with `main` at `mainHead` and branch `b` at `branchHead`, and staged commit rows. */
const setup = (name: string, mainHead: string | null, branchHead: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const orgId = randomUUID()
    const repoId = randomUUID()
    yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: name, name })}`
    yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "r" })}`
    const created = "2026-11-22T00:00:00+00:00"
    yield* sql`INSERT INTO branches ${sql.insert({ repo_id: repoId, name: "main", head: mainHead, created_by: "t", created_at: created })}`
    yield* sql`INSERT INTO branches ${sql.insert({ repo_id: repoId, name: "b", head: branchHead, created_by: "t", created_at: created })}`
    for (const hash of [h("c"), h("d")]) {
      yield* sql`INSERT INTO commits ${
        sql.insert({ repo_id: repoId, hash, branch_name: "main", manifest_hash: h("e"), author: "t", timestamp: created, files: "[]" })
      }`
    }
    const heads = sql<{ name: string; head: string | null; status: string }>`SELECT name, head, status FROM branches WHERE repo_id = ${repoId} ORDER BY name`
    const reached = sql<{ tree_hash: string }>`SELECT tree_hash FROM repo_trees WHERE repo_id = ${repoId}`.pipe(
      Effect.map((rows) => rows.map((r) => r.tree_hash))
    )
    return { repoId, heads, reached, key: `${name}/r` }
  })

const run = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient | Outbox.Outbox>) => runCommand(TestOutbox, effect)

layer(Db, { timeout: 60_000 })("landing commands", (it) => {
  it.effect("merge: main_moved when main's head changed, branch_moved when the branch's did; nothing changes", () =>
    Effect.gen(function*() {
      const repo = yield* setup("o1", h("a"), h("b"))
      const before = yield* repo.heads
      const base = { branch: "b", commit: h("c"), manifest: h("e"), message: "m", gateOverridden: false, actor: "t" }
      const stale = yield* run(merge({ ...base, expectedMainHead: h("9"), expectedBranchHead: h("b"), newTrees: [h("e")] }, context(repo.key)))
      expect(stale._tag === "Failure" && stale.failure._tag).toBe("MainMoved")
      const moved = yield* run(merge({ ...base, expectedMainHead: h("a"), expectedBranchHead: h("8"), newTrees: [h("e")] }, context(repo.key)))
      expect(moved._tag === "Failure" && moved.failure._tag).toBe("BranchMoved")
      expect(yield* repo.heads).toEqual(before)
      expect(yield* repo.reached).toEqual([])
      const landed = yield* run(merge({ ...base, expectedMainHead: h("a"), expectedBranchHead: h("b"), newTrees: [h("e")] }, context(repo.key)))
      expect(landed._tag).toBe("Success")
      expect(yield* repo.heads).toEqual([{ name: "b", head: h("b"), status: "merged" }, { name: "main", head: h("c"), status: "open" }])
      expect(events.at(-1)).toMatchObject({ type: "merge", branch: "b", commit: h("c") })
      // The squash commit's new trees are now reached by the repository (access and size accounting).
      expect(yield* repo.reached).toEqual([h("e")])
    }))

  it.effect("sync and revert: branch_moved when the branch got commits meanwhile; nothing changes", () =>
    Effect.gen(function*() {
      const repo = yield* setup("o2", h("a"), h("b"))
      const before = yield* repo.heads
      const synced = yield* run(sync({ branch: "b", expectedBranchHead: h("7"), commit: h("c"), mergeParent: h("a"), newTrees: [h("e")], actor: "t" }, context(repo.key)))
      expect(synced._tag === "Failure" && synced.failure._tag).toBe("BranchMoved")
      const reverted = yield* run(revert({ branch: "main", expectedHead: h("7"), commit: h("d"), reverted: h("a"), message: "Revert", newTrees: [h("e")], actor: "t" }, context(repo.key)))
      expect(reverted._tag === "Failure" && reverted.failure._tag).toBe("BranchMoved")
      expect(yield* repo.heads).toEqual(before)
      const ok = yield* run(sync({ branch: "b", expectedBranchHead: h("b"), commit: h("c"), mergeParent: h("a"), newTrees: [h("e")], actor: "t" }, context(repo.key)))
      expect(ok._tag).toBe("Success")
      expect((yield* repo.heads).find((b) => b.name === "b")?.head).toBe(h("c"))
      expect(events.at(-1)).toMatchObject({ type: "push", branch: "b", commit: h("c") })
    }))
})
