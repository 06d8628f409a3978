/**
 * The staged push's rows and its finalizer, run directly against a migrated in-memory database
 * (PGlite): the head's compare-and-set, the checks of the stage's history, what publishing
 * changes (commits, reached trees and blobs, the head, the stage) and what it leaves alone, the
 * replay of a finished stage, aborts and collection.
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { commandContext, recordingOutbox, repositoryRows, runCommand } from "../entities/Commands.testing.ts"
import { handlers } from "./FinalizeStageCommand.ts"
import { MAX_ACTIVE_STAGES, PushStages } from "./PushStages.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Stages = PushStages.layer.pipe(Layer.provideMerge(Db))

const { events, layer: TestOutbox } = recordingOutbox()

const h = (c: string) => c.repeat(64)
const created = "2026-11-25T00:00:00+00:00"
const branchData = { name: "feat", status: "open", created_at: created, description: "staged" }

/** A repository whose branch `feat` is at `head` (published commit a), and unpublished commits b <- c <- d on top of it. */
const setup = (slug: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { orgId, repoId } = yield* repositoryRows(slug)
    yield* sql`INSERT INTO branches ${sql.insert({ repo_id: repoId, name: "feat", head: h("a"), created_by: "t", created_at: created, pushed_at: new Date() })}`
    const commit = (hash: string, parent: string | null, published: boolean) =>
      sql`INSERT INTO commits ${
        sql.insert({ repo_id: repoId, hash, branch_name: "feat", parent_hash: parent, manifest_hash: h("e"), author: "t", timestamp: created, files: "[]", published })
      }`
    yield* commit(h("a"), null, true)
    yield* commit(h("b"), h("a"), false)
    yield* commit(h("c"), h("b"), false)
    yield* commit(h("d"), h("c"), false)
    yield* commit(h("f"), h("9"), false)
    yield* sql`INSERT INTO trees ${sql.insert({ org_id: orgId, hash: h("e"), body: "" })}`
    const state = Effect.gen(function*() {
      const head = (yield* sql<{ head: string }>`SELECT head FROM branches WHERE repo_id = ${repoId} AND name = 'feat'`)[0]?.head
      const published = (yield* sql<{ hash: string }>`SELECT hash FROM commits WHERE repo_id = ${repoId} AND published ORDER BY hash`).map((r) => r.hash)
      const trees = (yield* sql<{ tree_hash: string }>`SELECT tree_hash FROM repo_trees WHERE repo_id = ${repoId}`).map((r) => r.tree_hash)
      const owned = Number((yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM push_stage_objects WHERE repo_id = ${repoId}`)[0]!.n)
      return { head, published, trees, owned }
    })
    return { repoId, key: `${slug}/r:feat`, state }
  })

const boundary = (stageId: string, expectedHead: string | null = h("a")) => ({
  stageId,
  principal: "user:1",
  branch: "feat",
  branchIdentity: "identity",
  expectedHead,
  force: false
})

const finalize = (key: string, stageId: string, target: string, over: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const payload = { stageId, principal: "user:1", branchIdentity: "identity", expectedHead: h("a"), force: false, target, branch: branchData, actor: "t", ...over }
    return yield* runCommand(TestOutbox, handlers.FinalizeStage(payload as never, commandContext("Branch", key, "FinalizeStage")))
  })

const failureTag = (r: { _tag: string }) => (r as { failure?: { _tag: string; code?: string } }).failure

layer(Stages, { timeout: 60_000 })("staged push finalizer", (it) => {
  it.effect("publishes the stage's commits, accounts its trees, moves the head and closes the stage; a replay answers the same", () =>
    Effect.gen(function*() {
      const stages = yield* PushStages
      const repo = yield* setup("s1")
      const stage = (yield* stages.open(repo.repoId, boundary("stage-one-000001")))!
      expect(yield* stages.admit(repo.repoId, stage.stageId, stage.version, { commits: [h("b"), h("c")], trees: [h("e")], blobs: [] })).toBe(true)
      // A second batch with the version it read first lost the race: nothing recorded.
      expect(yield* stages.admit(repo.repoId, stage.stageId, stage.version, { commits: [h("d")], trees: [], blobs: [] })).toBe(false)
      const now = (yield* stages.find(repo.repoId, stage.stageId))!
      expect(yield* stages.admit(repo.repoId, stage.stageId, now.version, { commits: [h("d")], trees: [], blobs: [] })).toBe(true)
      expect((yield* stages.find(repo.repoId, stage.stageId))!.commitCount).toBe(3)

      const landed = yield* finalize(repo.key, stage.stageId, h("d"))
      expect(landed).toMatchObject({ _tag: "Success", success: { success: true, new_head: h("d") } })
      expect(yield* repo.state).toEqual({ head: h("d"), published: [h("a"), h("b"), h("c"), h("d")], trees: [h("e")], owned: 0 })
      expect(events.at(-1)).toMatchObject({ type: "push", branch: "feat", commit: h("d") })
      expect((yield* stages.find(repo.repoId, stage.stageId))).toMatchObject({ state: "completed", completedTarget: h("d") })

      const replay = yield* finalize(repo.key, stage.stageId, h("d"))
      expect(replay).toMatchObject({ _tag: "Success", success: { success: true, new_head: h("d"), message: "already finalized" } })
      const other = yield* finalize(repo.key, stage.stageId, h("c"))
      expect(failureTag(other)).toMatchObject({ _tag: "StageInvalid", code: "stage_completed" })
      // A finished stage takes no more batches.
      expect(yield* stages.admit(repo.repoId, stage.stageId, (yield* stages.find(repo.repoId, stage.stageId))!.version, { commits: [], trees: [], blobs: [] })).toBe(false)
    }))

  it.effect("a moved head answers success: false and changes nothing; so do bad targets and histories, as errors", () =>
    Effect.gen(function*() {
      const stages = yield* PushStages
      const repo = yield* setup("s2")
      const stage = (yield* stages.open(repo.repoId, boundary("stage-two-000001")))!
      yield* stages.admit(repo.repoId, stage.stageId, stage.version, { commits: [h("b"), h("c"), h("f")], trees: [h("e")], blobs: [] })
      const before = yield* repo.state

      const moved = yield* finalize(repo.key, stage.stageId, h("c"), { expectedHead: h("b") })
      expect(failureTag(moved)).toMatchObject({ _tag: "StageInvalid", code: "stage_mismatch" })
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE branches SET head = ${h("9")} WHERE repo_id = ${repo.repoId} AND name = 'feat'`
      const stale = yield* finalize(repo.key, stage.stageId, h("c"))
      expect(stale).toMatchObject({ _tag: "Success", success: { success: false, new_head: h("9") } })
      yield* sql`UPDATE branches SET head = ${h("a")} WHERE repo_id = ${repo.repoId} AND name = 'feat'`

      // f's parent (9…) is neither staged nor published, and c does not reach f.
      expect(failureTag(yield* finalize(repo.key, stage.stageId, h("c")))).toMatchObject({ code: "stage_unreachable" })
      expect(failureTag(yield* finalize(repo.key, stage.stageId, h("f")))).toMatchObject({ code: "stage_unreachable" })
      expect(failureTag(yield* finalize(repo.key, stage.stageId, h("d")))).toMatchObject({ code: "target_not_staged" })
      expect(failureTag(yield* finalize(repo.key, "no-such-stage-0001", h("c")))).toMatchObject({ _tag: "StageMissing" })
      expect(failureTag(yield* finalize(repo.key, stage.stageId, h("c"), { principal: "user:2" }))).toMatchObject({ _tag: "StageMissing" })
      expect(yield* repo.state).toEqual(before)
    }))

  it.effect("the target must descend from the expected head unless forced; a forced stage may start at any published commit", () =>
    Effect.gen(function*() {
      const stages = yield* PushStages
      const repo = yield* setup("s3")
      const sql = yield* SqlClient.SqlClient
      // The branch moved on to a published x; the stage expects x but its history starts at a.
      yield* sql`INSERT INTO commits ${
        sql.insert({ repo_id: repo.repoId, hash: h("7"), branch_name: "feat", parent_hash: h("a"), manifest_hash: h("e"), author: "t", timestamp: created, files: "[]", published: true })
      }`
      yield* sql`UPDATE branches SET head = ${h("7")} WHERE repo_id = ${repo.repoId} AND name = 'feat'`
      const plain = (yield* stages.open(repo.repoId, boundary("stage-three-00001", h("7"))))!
      yield* stages.admit(repo.repoId, plain.stageId, plain.version, { commits: [h("b")], trees: [], blobs: [] })
      expect(failureTag(yield* finalize(repo.key, plain.stageId, h("b"), { expectedHead: h("7") }))).toMatchObject({ code: "stage_not_descendant" })
      const forced = (yield* stages.open(repo.repoId, { ...boundary("stage-three-00002", h("7")), force: true }))!
      yield* stages.admit(repo.repoId, forced.stageId, forced.version, { commits: [h("b")], trees: [], blobs: [] })
      const landed = yield* finalize(repo.key, forced.stageId, h("b"), { expectedHead: h("7"), force: true })
      expect(landed).toMatchObject({ _tag: "Success", success: { success: true, new_head: h("b") } })
    }))

  it.effect("an aborted stage keeps nothing and cannot be finalized; the repository's open stages are limited; expired ones are collected", () =>
    Effect.gen(function*() {
      const stages = yield* PushStages
      const repo = yield* setup("s4")
      const stage = (yield* stages.open(repo.repoId, boundary("stage-four-000000")))!
      yield* stages.admit(repo.repoId, stage.stageId, stage.version, { commits: [h("b")], trees: [h("e")], blobs: [] })
      const admitted = (yield* stages.find(repo.repoId, stage.stageId))!
      expect(yield* stages.abort(repo.repoId, stage.stageId, stage.version)).toBe(false)
      expect(yield* stages.abort(repo.repoId, stage.stageId, admitted.version)).toBe(true)
      expect((yield* repo.state).owned).toBe(0)
      expect(failureTag(yield* finalize(repo.key, stage.stageId, h("b")))).toMatchObject({ _tag: "StageAborted" })
      expect((yield* repo.state).published).toEqual([h("a")])

      for (let i = 1; i < MAX_ACTIVE_STAGES + 1; i++) {
        expect(yield* stages.open(repo.repoId, boundary(`stage-four-00000${i}`))).toMatchObject({ state: "active" })
      }
      expect(yield* stages.open(repo.repoId, boundary("stage-four-000099"))).toBeUndefined()
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE push_stages SET expires_at = now() - interval '1 second' WHERE repo_id = ${repo.repoId}`
      // Opening collects this repository's expired stages first; `collect` does it everywhere.
      expect(yield* stages.open(repo.repoId, boundary("stage-four-000099"))).toMatchObject({ state: "active" })
      yield* sql`UPDATE push_stages SET expires_at = now() - interval '1 second' WHERE repo_id = ${repo.repoId}`
      expect(yield* stages.collect).toBeGreaterThanOrEqual(1)
      expect(yield* stages.find(repo.repoId, "stage-four-000099")).toBeUndefined()
    }))
})
