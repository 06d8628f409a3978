/**
 * Planning `POST /{owner}/{name}/branches/{branch}/sync`: merge the parent
 * (main) into the branch as a new commit on the branch whose merge parent is
 * the parent's head. Computed outside the entity; the Sync command lands it
 * with a compare-and-set on the branch head (`branch_moved` if it moved).
 */
import * as MergeBase from "@grove/core/merge/MergeBase"
import * as TreeMerge from "@grove/core/merge/TreeMerge"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Effect } from "effect"
import { Branches } from "../content/Branches.ts"
import { loadCommitHeaders } from "../content/CommitHeaders.ts"
import { History } from "../content/History.ts"
import { type ComputedCommit, refuse, writeCommit } from "./Landing.ts"
import { MAIN } from "./MergePlanner.ts"
import { PlanningTrees } from "./PlanningTrees.ts"

export type PlannedSync =
  /** The branch already contains its parent's head. */
  | { readonly kind: "up_to_date"; readonly head: string | null }
  | {
    readonly kind: "sync"
    readonly branchHead: string
    readonly parentHead: string
    readonly commit: ComputedCommit
  }

/** The Sync command's payload for a planned sync: the one mapping, for the handler and the tests. */
export const syncPayload = (planned: Extract<PlannedSync, { readonly kind: "sync" }>, branch: string, actor: string) => ({
  branch,
  expectedBranchHead: planned.branchHead,
  commit: planned.commit.hash,
  mergeParent: planned.parentHead,
  newTrees: planned.commit.newTrees,
  actor
})

export const planSync = Effect.fn("SyncPlanner.planSync")(function*(
  repo: { readonly id: string; readonly orgId: string },
  name: string,
  actor: string
) {
  const branches = yield* Branches
  const trees = yield* PlanningTrees
  const history = yield* History
  const branch = yield* branches.get(repo.id, name)
  if (branch === undefined) return yield* refuse(404, `branch '${name}' not found`, "branch_not_found")
  if (name === MAIN) return yield* refuse(400, "main has no parent to sync with", "invalid_branch")
  if (branch.status !== "open") {
    return yield* refuse(400, `branch '${name}' is ${branch.status === "merged" ? "merged" : "closed"}; it cannot be synced`, `branch_${branch.status}`)
  }
  const parent = yield* branches.get(repo.id, branch.parentBranch ?? MAIN)
  const parentHead = parent?.head ?? null
  if (parentHead === null) return { kind: "up_to_date", head: branch.head } satisfies PlannedSync
  if (branch.head === null) return yield* refuse(400, `branch '${name}' has no commits; push first`, "empty_branch")
  const edges = yield* history.ancestry(repo.id, [branch.head, parentHead])
  const parents = (h: string) => edges.get(h)
  if (MergeBase.isAncestor(parentHead, branch.head, parents, MergeBase.generationsOf(edges))) return { kind: "up_to_date", head: branch.head } satisfies PlannedSync

  const base = MergeBase.mergeBase(branch.head, parentHead, parents, MergeBase.generationsOf(edges))
  const commits = yield* loadCommitHeaders(repo.id, [branch.head, parentHead, ...(base === null ? [] : [base])])
  const cache = trees.view(repo.orgId)
  const oursRoot = commits.get(branch.head)!.manifest_hash
  const result = yield* cache.resolve((lookup) =>
    TreeMerge.mergeTrees(base === null ? Blake3.EMPTY_HASH : commits.get(base)!.manifest_hash, oursRoot, commits.get(parentHead)!.manifest_hash, lookup)
  )
  if (!result.ok) return yield* Effect.die(new Error(`a published manifest refers to a missing tree: ${result.reason}`))
  if (result.conflicts.length > 0) {
    const paths = result.conflicts.map((c) => c.path)
    return yield* refuse(409, `syncing '${name}' with its parent conflicts in ${paths.length} path(s): resolve locally (grove pull), push`, "conflict", paths)
  }
  const commit = yield* writeCommit(repo, cache, {
    branch: name,
    parent: branch.head,
    mergeParent: parentHead,
    author: actor,
    message: null,
    beforeRoot: oursRoot,
    before: result.ours,
    after: result.merged
  })
  return { kind: "sync", branchHead: branch.head, parentHead, commit } satisfies PlannedSync
})
