/**
 * The expensive half of a squash merge, computed outside the Repository
 * entity's one-at-a-time section: merge base, three-way tree merge of main and
 * the branch, the merged trees and the squash commit, written unpublished. The
 * Repository entity's Merge command then lands it with a compare-and-set on
 * both heads (see MergeCommand.ts); if either moved meanwhile nothing merges.
 */
import * as MergeBase from "@grove/core/merge/MergeBase"
import * as Snapshots from "@grove/core/merge/Snapshots"
import * as ThreeWay from "@grove/core/merge/ThreeWay"
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Commit from "@grove/core/objects/Commit"
import * as FileChanges from "@grove/core/objects/FileChanges"
import * as Timestamp from "@grove/core/objects/Timestamp"
import * as Tree from "@grove/core/objects/Tree"
import { Effect, Schema } from "effect"
import type { BranchRecord } from "./BranchRecord.ts"
import { Branches } from "./Branches.ts"
import { ContentObjects } from "./ContentObjects.ts"
import { History } from "./History.ts"
import { makeTreeCache } from "./TreeCache.ts"

export const MAIN = "main"

/** The merge cannot be planned; the status is the answer's. */
export class MergeRefused extends Schema.TaggedError<MergeRefused>()("MergeRefused", {
  status: Schema.Literals([400, 404, 409]),
  message: Schema.String,
  code: Schema.String,
  conflictPaths: Schema.optional(Schema.Array(Schema.String))
}) {}

export interface PlannedMerge {
  readonly branch: BranchRecord
  readonly mainHead: string | null
  readonly branchHead: string
  readonly commitHash: string
  readonly manifestHash: string
  readonly message: string
  readonly stagedId: string
}

const refuse = (status: 400 | 404 | 409, message: string, code: string, conflictPaths?: ReadonlyArray<string>) =>
  Effect.fail(new MergeRefused({ status, message, code, ...(conflictPaths === undefined ? {} : { conflictPaths }) }))

/** What a published commit says about the branch's state for merging. */
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
  actor: string
) {
  const branches = yield* Branches
  const objects = yield* ContentObjects
  const history = yield* History
  const branch = yield* branches.get(repo.id, name)
  const branchHead = yield* checkMergeable(branch, name)
  const main = yield* branches.get(repo.id, MAIN)
  const mainHead = main?.head ?? null

  const commits = yield* objects.loadCommits(repo.id, [branchHead, ...(mainHead === null ? [] : [mainHead])])
  const branchCommit = commits.get(branchHead)!
  const mainCommit = mainHead === null ? undefined : commits.get(mainHead)
  let baseManifest = Blake3.EMPTY_HASH
  if (mainHead !== null) {
    const edges = yield* history.ancestry(repo.id)
    const base = MergeBase.mergeBase(mainHead, branchHead, (h) => edges.get(h))
    if (base === branchHead) return yield* refuse(400, `branch '${name}' has no changes that are not on main; close it instead`, "no_changes")
    if (base !== null) baseManifest = (yield* objects.loadCommits(repo.id, [base])).get(base)?.manifest_hash ?? Blake3.EMPTY_HASH
  }

  const cache = makeTreeCache(objects, repo.orgId)
  const flatten = (root: string) =>
    cache.resolve((lookup) => FileChanges.flattenTree(root, (h) => lookup(h) ?? (h === Blake3.EMPTY_HASH ? [] : undefined)))
  const [base, ours, theirs] = [
    yield* flatten(baseManifest),
    yield* flatten(mainCommit?.manifest_hash ?? Blake3.EMPTY_HASH),
    yield* flatten(branchCommit.manifest_hash)
  ]
  if (!base.ok || !ours.ok || !theirs.ok) return yield* Effect.die(new Error("a published manifest refers to a missing tree"))
  const result = ThreeWay.mergeSnapshots(base.files, ours.files, theirs.files)
  if (result.conflicts.length > 0) {
    const paths = result.conflicts.map((c) => c.path)
    return yield* refuse(409, `branch '${name}' conflicts with main in ${paths.length} path(s): sync it with main, resolve, push`, "conflict", paths)
  }
  const files = TreeDiff.diffSnapshots(ours.files, result.merged)
  if (files.length === 0) return yield* refuse(400, `branch '${name}' has no changes relative to main; close it instead`, "no_changes")
  const built = Snapshots.buildTrees(result.merged)
  if (!built.ok) return yield* refuse(409, `the merged tree is invalid: ${built.reason}`, "conflict")

  const message = branch!.description?.trim() || name
  const fields = {
    branch_name: MAIN,
    parent_hash: mainHead,
    merge_parent_hash: branchHead,
    manifest_hash: built.root,
    author: actor,
    message,
    // Microseconds, as the Oak client stamps its commits.
    timestamp: (Timestamp.fromDate(new Date()) / 1000n) * 1000n
  }
  const hash = Commit.hashCommit(fields)
  const trees = [...built.trees].map(([h, entries]) => ({ hash: h, body: Tree.encodeTree(entries) }))
  yield* objects.storeTrees(repo.orgId, trees)
  yield* objects.stageCommits(repo.id, [{
    hash,
    branch_name: MAIN,
    parent_hash: mainHead,
    merge_parent_hash: branchHead,
    manifest_hash: built.root,
    author: actor,
    message,
    timestamp: Timestamp.formatTimestamp(fields.timestamp),
    files: files.map((f) => ({
      path: f.path,
      change_type: f.change_type,
      old_blob_hash: f.old_blob_hash,
      new_blob_hash: f.new_blob_hash,
      ...(f.old_path == null ? {} : { old_path: f.old_path }),
      ...(f.old_mode == null ? {} : { old_mode: f.old_mode }),
      ...(f.new_mode == null ? {} : { new_mode: f.new_mode })
    }))
  }])
  // Every merged blob comes from main or the branch, which the repository already references; only trees can be new.
  const stagedId = yield* objects.stagePush(repo.id, { trees: trees.map((t) => t.hash), blobs: [] })
  const planned: PlannedMerge = { branch: branch!, mainHead, branchHead, commitHash: hash, manifestHash: built.root, message, stagedId }
  return planned
})
