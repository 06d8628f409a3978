/**
 * The expensive half of a squash merge, computed outside the Repository
 * entity's one-at-a-time section: the CI gate, merge base, three-way tree
 * merge of main and the branch, the merged trees and the squash commit, written
 * unpublished. The Repository entity's Merge command then lands it with a
 * compare-and-set on both heads (MergeCommand.ts); if either moved meanwhile
 * nothing merges.
 */
import * as MergeBase from "@grove/core/merge/MergeBase"
import * as ThreeWay from "@grove/core/merge/ThreeWay"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Effect } from "effect"
import type { BranchRecord } from "./BranchRecord.ts"
import { Branches } from "./Branches.ts"
import { ciGate } from "./CiGate.ts"
import { ContentObjects } from "./ContentObjects.ts"
import { History } from "./History.ts"
import { refuse, snapshotOf, writeCommit } from "./Landing.ts"
import { makeTreeCache } from "./TreeCache.ts"

export const MAIN = "main"

export interface PlannedMerge {
  readonly branch: BranchRecord
  readonly mainHead: string | null
  readonly branchHead: string
  readonly commitHash: string
  readonly manifestHash: string
  readonly message: string
  readonly newTrees: ReadonlyArray<string>
  /** The CI gate was closed and `force` opened it (recorded in the audit log). */
  readonly gateOverridden: boolean
}

/** What a branch's record says about merging it. */
export const checkMergeable = (branch: BranchRecord | undefined, name: string) => {
  if (branch === undefined) return refuse(404, `branch '${name}' not found`, "branch_not_found")
  if (name === MAIN) return refuse(400, "main cannot be merged into itself", "invalid_branch")
  if (branch.status === "merged") return refuse(400, `branch '${name}' was already merged`, "already_merged")
  if (branch.status === "closed") return refuse(400, `branch '${name}' is already closed; reopen it to merge`, "branch_closed")
  if (branch.head === null) return refuse(400, `branch '${name}' has no commits`, "empty_branch")
  if ((branch.parentBranch ?? MAIN) !== MAIN) {
    return refuse(400, `branch '${name}' has parent '${branch.parentBranch}'; only branches of main can be merged`, "invalid_parent")
  }
  return Effect.succeed(branch.head)
}

export const planMerge = Effect.fn("MergePlanner.planMerge")(function*(
  repo: { readonly id: string; readonly orgId: string },
  name: string,
  actor: string,
  force: boolean
) {
  const branches = yield* Branches
  const objects = yield* ContentObjects
  const history = yield* History
  const branch = yield* branches.get(repo.id, name)
  const branchHead = yield* checkMergeable(branch, name)

  const gate = yield* ciGate(repo.id, branchHead)
  if (!gate.open && !force) {
    const what = gate.reason === "running" ? "is still running" : "is failing"
    return yield* refuse(412, `CI ${what} on the branch head (${gate.workflows.join(", ")}); wait for it, fix it, or merge with force=1`, `ci_${gate.reason}`)
  }

  const main = yield* branches.get(repo.id, MAIN)
  const mainHead = main?.head ?? null
  const commits = yield* objects.loadCommits(repo.id, [branchHead, ...(mainHead === null ? [] : [mainHead])])
  const branchCommit = commits.get(branchHead)!
  let baseManifest = Blake3.EMPTY_HASH
  if (mainHead !== null) {
    const edges = yield* history.ancestry(repo.id)
    const base = MergeBase.mergeBase(mainHead, branchHead, (h) => edges.get(h))
    if (base === branchHead) return yield* refuse(400, `branch '${name}' has no changes that are not on main; close it instead`, "no_changes")
    if (base !== null) baseManifest = (yield* objects.loadCommits(repo.id, [base])).get(base)?.manifest_hash ?? Blake3.EMPTY_HASH
  }

  const cache = makeTreeCache(objects, repo.orgId)
  const base = yield* snapshotOf(cache, baseManifest)
  const ours = yield* snapshotOf(cache, commits.get(mainHead ?? "")?.manifest_hash ?? Blake3.EMPTY_HASH)
  const theirs = yield* snapshotOf(cache, branchCommit.manifest_hash)
  const result = ThreeWay.mergeSnapshots(base, ours, theirs)
  if (result.conflicts.length > 0) {
    const paths = result.conflicts.map((c) => c.path)
    return yield* refuse(409, `branch '${name}' conflicts with main in ${paths.length} path(s): sync it with main, resolve, push`, "conflict", paths)
  }
  const unchanged = result.merged.size === ours.size && [...result.merged].every(([p, f]) => {
    const o = ours.get(p)
    return o !== undefined && o.hash === f.hash && o.mode === f.mode
  })
  if (unchanged) return yield* refuse(400, `branch '${name}' has no changes relative to main; close it instead`, "no_changes")

  const message = branch!.description?.trim() || name
  const commit = yield* writeCommit(repo, {
    branch: MAIN,
    parent: mainHead,
    mergeParent: branchHead,
    author: actor,
    message,
    before: ours,
    after: result.merged
  })
  const planned: PlannedMerge = {
    branch: branch!,
    mainHead,
    branchHead,
    commitHash: commit.hash,
    manifestHash: commit.manifestHash,
    message,
    newTrees: commit.newTrees,
    gateOverridden: !gate.open
  }
  return planned
})
