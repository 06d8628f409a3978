/**
 * The compare-and-set of the Repository entity's Merge, Sync and Revert commands, run directly
 * against a migrated in-memory database (PGlite): a head that moved between planning and landing
 * answers main_moved / branch_moved and leaves every row as it was; the expected heads land.
 */
import { Outbox } from "@grove/bus"
import { DbEmbedded, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Tracer } from "effect"
import { SqlClient } from "effect/sql"
import { merge } from "./MergeCommand.ts"
import { revert, sync } from "./SyncRevertCommands.ts"
import { commandContext, recordingOutbox, runCommand } from "../entities/Commands.testing.ts"
import { repositoryRows } from "../entities/Commands.testing.ts"
import { branchRow } from "./MergeFixtures.testing.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)

const { events, layer: TestOutbox } = recordingOutbox()
const context = (entityId: string) => commandContext("Repository", entityId)

const h = (c: string) => c.repeat(64)

/** An organization, a repository with `main` at `mainHead` and branch `b` at `branchHead`, and staged commit rows. */
const setup = (name: string, mainHead: string | null, branchHead: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { repoId, key } = yield* repositoryRows(name)
    const created = "2026-11-22T00:00:00+00:00"
    yield* branchRow(repoId, "main", mainHead)
    yield* branchRow(repoId, "b", branchHead)
    for (const hash of [h("c"), h("d")]) {
      yield* sql`INSERT INTO commits ${
        sql.insert({ repo_id: repoId, hash, branch_name: "main", manifest_hash: h("e"), author: "t", timestamp: created, files: "[]" })
      }`
    }
    const heads = sql<{ name: string; head: string | null; status: string }>`SELECT name, head, status FROM branches WHERE repo_id = ${repoId} ORDER BY name`
    const reached = sql<{ tree_hash: string }>`SELECT tree_hash FROM repo_trees WHERE repo_id = ${repoId}`.pipe(
      Effect.map((rows) => rows.map((r) => r.tree_hash))
    )
    return { repoId, heads, reached, key }
  })

const run = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient | Outbox.Outbox>) => runCommand(TestOutbox, effect)

/** The events in `event_outbox` of a repository, oldest first (the merge writes its own row). */
const outboxed = (repoId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ payload: unknown }>`SELECT payload FROM event_outbox WHERE payload->>'repository_id' = ${repoId} ORDER BY id`
    return rows.map((r) => (typeof r.payload === "string" ? JSON.parse(r.payload) : r.payload) as Record<string, unknown>)
  })

/** The SQL statements `effect` runs (each is a client span carrying its text), with its outcome. */
const statementsOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const spans: Array<Tracer.Span> = []
    const tracer = Tracer.make({
      span(options) {
        const span = Tracer.nativeTracer.span(options)
        spans.push(span)
        return span
      }
    })
    const result = yield* Effect.withTracer(effect, tracer)
    const statements = spans.flatMap((s) => {
      const text = s.attributes.get("db.query.text")
      return typeof text === "string" ? [text] : []
    })
    return { result, statements }
  })

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
      expect(yield* outboxed(repo.repoId)).toMatchObject([{ type: "merge", branch: "b", commit: h("c") }])
      // The squash commit's new trees are now reached by the repository (access and size accounting).
      expect(yield* repo.reached).toEqual([h("e")])
    }))

  it.effect("merge: lands in one statement (the repository's lock, the landing with its event and audit row); a refusal writes nothing", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* setup("o3", h("a"), h("b"))
      const base = { branch: "b", commit: h("c"), manifest: h("e"), message: "m", gateOverridden: true, actor: "t", newTrees: [h("e"), h("f")] }
      const audits = sql<{ action: string; details: unknown }>`SELECT action, details FROM audit_log WHERE target = 'o3/r'`
      const refused = yield* run(merge({ ...base, expectedMainHead: h("a"), expectedBranchHead: h("9") }, context(repo.key)))
      expect(refused._tag === "Failure" && refused.failure._tag).toBe("BranchMoved")
      expect(yield* audits).toEqual([])
      expect(yield* outboxed(repo.repoId)).toEqual([])
      const { result, statements } = yield* statementsOf(run(merge({ ...base, expectedMainHead: h("a"), expectedBranchHead: h("b") }, context(repo.key))))
      expect(result._tag).toBe("Success")
      // Was ten: a read per row, a write per table, and the outbox's insert; then two (the repository's lock apart).
      expect(statements.length).toBe(1)
      expect(yield* outboxed(repo.repoId)).toMatchObject([{ type: "merge", v: 1, branch: "b", commit: h("c"), owner: "o3", repo: "r", pusher: "t" }])
      const [audit] = yield* audits
      expect(audit?.action).toBe("branch.merge.forced")
      expect(typeof audit?.details === "string" ? JSON.parse(audit.details) : audit?.details)
        .toEqual({ branch: "b", commit: h("c"), merge_parent: h("b"), ci_gate_overridden: true })
      expect((yield* repo.reached).sort()).toEqual([h("e"), h("f")])
      const [published] = yield* sql<{ published: boolean }>`SELECT published FROM commits WHERE repo_id = ${repo.repoId} AND hash = ${h("c")}`
      expect(published?.published).toBe(true)
      const [head] = yield* sql<{ head: string }>`SELECT head FROM repositories WHERE id = ${repo.repoId}`
      expect(head?.head).toBe(h("c"))
      // Merged: merging again is refused as such, and writes nothing.
      const again = yield* run(merge({ ...base, expectedMainHead: h("c"), expectedBranchHead: h("b") }, context(repo.key)))
      expect(again._tag === "Failure" && again.failure._tag === "BranchStateInvalid" && again.failure.code).toBe("already_merged")
      expect((yield* audits).length).toBe(1)
      expect((yield* outboxed(repo.repoId)).length).toBe(1)
    }))

  it.effect("merge: the first merge of a repository without main creates main; a stale null expectation is main_moved", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* setup("o4", null, h("b"))
      yield* sql`DELETE FROM branches WHERE repo_id = ${repo.repoId} AND name = 'main'`
      const base = { branch: "b", commit: h("c"), manifest: h("e"), message: "m", gateOverridden: false, actor: "t", newTrees: [] }
      const stale = yield* run(merge({ ...base, expectedMainHead: h("a"), expectedBranchHead: h("b") }, context(repo.key)))
      expect(stale._tag === "Failure" && stale.failure._tag).toBe("MainMoved")
      const landed = yield* run(merge({ ...base, expectedMainHead: null, expectedBranchHead: h("b") }, context(repo.key)))
      expect(landed._tag === "Success" && landed.success.parent_hash).toBe(undefined)
      expect(yield* repo.heads).toEqual([{ name: "b", head: h("b"), status: "merged" }, { name: "main", head: h("c"), status: "open" }])
      // main exists now: a second branch planned against "no main" does not land.
      yield* branchRow(repo.repoId, "b2", h("d"))
      const late = yield* run(merge({ ...base, branch: "b2", commit: h("d"), expectedMainHead: null, expectedBranchHead: h("d") }, context(repo.key)))
      expect(late._tag === "Failure" && late.failure._tag).toBe("MainMoved")
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
      const sql = yield* SqlClient.SqlClient
      const version = sql<{ version: number }>`SELECT version FROM repositories WHERE id = ${repo.repoId}`.pipe(Effect.map((rows) => Number(rows[0]!.version)))
      const versionBefore = yield* version
      const ok = yield* run(sync({ branch: "b", expectedBranchHead: h("b"), commit: h("c"), mergeParent: h("a"), newTrees: [h("e")], actor: "t" }, context(repo.key)))
      expect(ok._tag).toBe("Success")
      expect((yield* repo.heads).find((b) => b.name === "b")?.head).toBe(h("c"))
      expect(events.at(-1)).toMatchObject({ type: "push", branch: "b", commit: h("c") })
      // The repository's row changed (updated_at): so did its version, which caches compare records by.
      expect(yield* version).toBe(versionBefore + 1)
    }))
})
