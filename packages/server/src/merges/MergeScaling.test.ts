/**
 * Issue 24: a merge (and a sync, and a revert) of a one-file change costs what the change costs, not what
 * the tree holds. Each is planned and landed against a migrated in-memory database whose connection
 * counts the bytes the database sends back, in two repositories that differ only in the size of the
 * tree main started from (the commit that imported it lists every file). The bytes read must not grow
 * with the tree: reading the import's file list, or flattening a whole tree, fails it.
 */
import { expect, layer } from "@effect/vitest"
import { Migrations } from "@grove/storage"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { buildCommit, type Files } from "../../../../test/support/content.ts"
import { Branches } from "../content/Branches.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { History } from "../content/History.ts"
import { PlanningTrees } from "./PlanningTrees.ts"
import { commandContext, recordingOutbox, runCommand } from "../entities/Commands.testing.ts"
import { merge } from "./MergeCommand.ts"
import { branchRow, countedDatabase, storeCommit } from "./MergeFixtures.testing.ts"
import { repositoryRows } from "../entities/Commands.testing.ts"
import { mergePayload, planMerge } from "./MergePlanner.ts"
import { planRevert, revertPayload } from "./RevertPlanner.ts"
import { planSync, syncPayload } from "./SyncPlanner.ts"
import { revert, sync } from "./SyncRevertCommands.ts"

const { traffic, layer: Counted } = countedDatabase()
const Db = Migrations.layer.pipe(Layer.provideMerge(Counted), Layer.orDie)
const Content = Layer.mergeAll(Branches.layer, History.layer, PlanningTrees.layer).pipe(Layer.provideMerge(ContentObjects.layer), Layer.provideMerge(Db))
const { layer: TestOutbox } = recordingOutbox()

/**
 * A repository whose main imported `treeFiles` files (50 to a directory) and then added one more; branch `b`
 * adds a file to the import, branch `s` another. Answers the bytes read by merging `b`, syncing `s` with
 * main, reverting the commit before the merge (its tree differs from main's head: a second walk, over the
 * head, after the first over the commit) and then the merge, each planned and landed as the handlers do.
 */
const oneFileOperations = (name: string, treeFiles: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { orgId, repoId } = yield* repositoryRows(name)
    const files: Files = { "README.md": "# r\n" }
    for (let i = 1; i < treeFiles; i++) files[`tree/d${Math.floor(i / 50)}/f${i}.txt`] = `file ${i}\n`
    const imported = buildCommit({ branch: "main", files })
    const later = buildCommit({ branch: "main", files: { ...files, "later.txt": "later\n" }, parent: imported })
    const b = buildCommit({ branch: "b", files: { ...files, "files/b.txt": "b\n" }, parent: imported })
    const s = buildCommit({ branch: "s", files: { ...files, "files/s.txt": "s\n" }, parent: imported })
    for (const built of [imported, later, b, s]) yield* storeCommit(repoId, orgId, built)
    yield* branchRow(repoId, "main", later.commit.hash)
    yield* branchRow(repoId, "b", b.commit.hash)
    yield* branchRow(repoId, "s", s.commit.hash)
    const repo = { id: repoId, orgId }
    const context = commandContext("Repository", `${name}/r`)
    const measured = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.gen(function*() {
        const before = traffic.received
        const result = yield* effect
        return { result, bytes: traffic.received - before }
      })

    const merged = yield* measured(Effect.gen(function*() {
      const planned = yield* planMerge(repo, "b", "t", false)
      return yield* runCommand(TestOutbox, merge(mergePayload(planned, "b", "t"), context))
    }))
    const synced = yield* measured(Effect.gen(function*() {
      const planned = yield* planSync(repo, "s", "t")
      if (planned.kind !== "sync") return yield* Effect.die(new Error("s is behind main"))
      return yield* runCommand(TestOutbox, sync(syncPayload(planned, "s", "t"), context))
    }))
    if (merged.result._tag !== "Success") return yield* Effect.die(new Error("the merge did not land"))
    const squash = merged.result.success.commit_hash
    // A commit further back (main moved on since): the revert compares it with main's head at its paths.
    const revertOf = (hash: string) =>
      measured(Effect.gen(function*() {
        const planned = yield* planRevert(repo, hash, "t")
        return yield* runCommand(TestOutbox, revert(revertPayload(planned, "t"), context))
      }))
    const revertedOlder = yield* revertOf(later.commit.hash)
    const reverted = yield* revertOf(squash)
    for (const r of [merged, synced, reverted, revertedOlder]) expect(r.result._tag).toBe("Success")
    // What each wrote is what it should: main gets b's file and then not; s gets main's two new files.
    const tree = (hash: string) =>
      sql<{ manifest_hash: string; files: unknown }>`SELECT manifest_hash, files FROM commits WHERE repo_id = ${repoId} AND hash = ${hash}`.pipe(
        Effect.map((rows) => {
          const raw = rows[0]?.files
          return (typeof raw === "string" ? JSON.parse(raw) : raw) as ReadonlyArray<{ path: string; change_type: string }>
        })
      )
    expect((yield* tree(squash)).map((f) => [f.path, f.change_type])).toEqual([["files/b.txt", "added"]])
    if (synced.result._tag !== "Success" || reverted.result._tag !== "Success") return yield* Effect.die(new Error("unreachable"))
    expect((yield* tree(synced.result.success.head ?? "")).map((f) => [f.path, f.change_type])).toEqual([["files/b.txt", "added"], ["later.txt", "added"]])
    expect((yield* tree(reverted.result.success.commit_hash)).map((f) => [f.path, f.change_type])).toEqual([["files/b.txt", "deleted"]])
    if (revertedOlder.result._tag !== "Success") return yield* Effect.die(new Error("unreachable"))
    expect((yield* tree(revertedOlder.result.success.commit_hash)).map((f) => [f.path, f.change_type])).toEqual([["later.txt", "deleted"]])
    return { merge: merged.bytes, sync: synced.bytes, revert: reverted.bytes, revertOlder: revertedOlder.bytes }
  })

layer(Content, { timeout: 120_000 })("a one-file merge, sync and revert at two tree sizes", (it) => {
  it.effect("read as many bytes from the database in a 4,000-file repository as in a 10-file one", () =>
    Effect.gen(function*() {
      // The first statements of each kind are prepared (their descriptions are read once): not measured.
      yield* oneFileOperations("warm", 10)
      const small = yield* oneFileOperations("small", 10)
      const large = yield* oneFileOperations("large", 4000)
      // Only hashes and ids differ between the two (same lengths); the import's file list alone is ~600 KB,
      // and each of its 80 directories' trees ~3 KB.
      for (const op of ["merge", "sync", "revert", "revertOlder"] as const) {
        expect(large[op], `${op}: ${small[op]} bytes at 10 files, ${large[op]} at 4,000`).toBeLessThan(small[op] * 1.1 + 1024)
      }
    }))
})
