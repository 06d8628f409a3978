/**
 * Three squash merges on main, then a branch forked before the last one: merging it must not bring back a file the
 * last merge deleted. A merge base by commit generations (c259810, reverted) computed generations too low for
 * parents still being walked and took c0 for the base here instead of c4, so the merge re-added X.txt.
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
import { commandContext, recordingOutbox, repositoryRows, runCommand } from "../entities/Commands.testing.ts"
import { merge } from "./MergeCommand.ts"
import { branchRow, countedDatabase, storeCommit } from "./MergeFixtures.testing.ts"
import { mergePayload, planMerge } from "./MergePlanner.ts"

const { layer: Counted } = countedDatabase()
const Db = Migrations.layer.pipe(Layer.provideMerge(Counted), Layer.orDie)
const Content = Layer.mergeAll(Branches.layer, History.layer, PlanningTrees.layer).pipe(Layer.provideMerge(ContentObjects.layer), Layer.provideMerge(Db))
const { layer: TestOutbox } = recordingOutbox()

layer(Content, { timeout: 120_000 })("merge base after squash merges", (it) => {
  it.effect("a branch forked before main's last merge merges on that base: a file main deleted stays deleted", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { orgId, repoId } = yield* repositoryRows("crisscross")
      const f0: Files = { "README.md": "# r\n", "X.txt": "x\n" }
      const c0 = buildCommit({ branch: "main", files: f0 })
      const f1 = { ...f0, "a.txt": "a\n" }
      const c1 = buildCommit({ branch: "b0", files: f1, parent: c0 })
      const c2 = buildCommit({ branch: "main", files: f1, parent: c0, mergeParent: c1.commit.hash })
      const f3: Files = { ...f1, "b.txt": "b\n" }
      const c3 = buildCommit({ branch: "b1", files: f3, parent: c2 })
      const c4 = buildCommit({ branch: "main", files: f3, parent: c2, mergeParent: c3.commit.hash })
      const { "X.txt": _x, ...f5 } = f3
      const c5 = buildCommit({ branch: "b2", files: f5, parent: c4 })
      const c6 = buildCommit({ branch: "b3", files: { ...f3, "d.txt": "d\n" }, parent: c4 })
      const c7 = buildCommit({ branch: "main", files: f5, parent: c4, mergeParent: c5.commit.hash })
      for (const built of [c0, c1, c2, c3, c4, c5, c6, c7]) yield* storeCommit(repoId, orgId, built)
      yield* branchRow(repoId, "main", c7.commit.hash)
      yield* branchRow(repoId, "b3", c6.commit.hash)
      const planned = yield* planMerge({ id: repoId, orgId }, "b3", "t", false)
      const landed = yield* runCommand(TestOutbox, merge(mergePayload(planned, "b3", "t"), commandContext("Repository", "crisscross/r")))
      if (landed._tag !== "Success") return yield* Effect.die(new Error(`not landed: ${JSON.stringify(landed)}`))
      const [row] = yield* sql<{ files: unknown }>`SELECT files FROM commits WHERE repo_id = ${repoId} AND hash = ${landed.success.commit_hash}`
      const files = (typeof row!.files === "string" ? JSON.parse(row!.files) : row!.files) as ReadonlyArray<{ path: string; change_type: string }>
      expect(files.map((f) => [f.path, f.change_type])).toEqual([["d.txt", "added"]])
    }))
})
