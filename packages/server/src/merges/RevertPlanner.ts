/**
 * Planning `POST /{owner}/{name}/commits/{hash}/revert`: a commit on the
 * reverted commit's branch that puts back every file the commit changed (on
 * main: undoes the squash). Refused with 409 and the paths when any of those
 * files changed since. The Revert command lands it with a compare-and-set on
 * the branch head.
 */
import * as MergeBase from "@grove/core/merge/MergeBase"
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Effect } from "effect"
import { Branches } from "../content/Branches.ts"
import { loadCommitHeaders } from "../content/CommitHeaders.ts"
import { History } from "../content/History.ts"
import { type ComputedCommit, refuse, writeCommit } from "./Landing.ts"
import { PlanningTrees } from "./PlanningTrees.ts"
import type { RevertPayload } from "./SyncRevertCommands.ts"

export interface PlannedRevert {
  readonly branch: string
  readonly head: string
  readonly reverted: string
  readonly commit: ComputedCommit
  readonly message: string
}

/** The Revert command that lands a planned revert by `actor`. */
export const revertPayload = (planned: PlannedRevert, actor: string): typeof RevertPayload.Type => ({
  branch: planned.branch,
  expectedHead: planned.head,
  commit: planned.commit.hash,
  reverted: planned.reverted,
  message: planned.message,
  newTrees: planned.commit.newTrees,
  actor
})

type File = { readonly hash: string; readonly mode: string }
const same = (a: File | undefined, b: File | undefined) => a === b || (a !== undefined && b !== undefined && a.hash === b.hash && a.mode === b.mode)

export const planRevert = Effect.fn("RevertPlanner.planRevert")(function*(
  repo: { readonly id: string; readonly orgId: string },
  hash: string,
  actor: string
) {
  const branches = yield* Branches
  const trees = yield* PlanningTrees
  const history = yield* History
  if (!Blake3.isHash(hash)) return yield* refuse(400, "the commit must be a 64-character lowercase hex hash", "invalid_hash")
  const target = (yield* loadCommitHeaders(repo.id, [hash])).get(hash)
  if (target === undefined || !target.published) return yield* refuse(404, `commit ${hash} not found`, "commit_not_found")
  const branch = yield* branches.get(repo.id, target.branch_name)
  if (branch === undefined || branch.head === null) {
    return yield* refuse(404, `branch '${target.branch_name}' of commit ${hash} not found`, "branch_not_found")
  }
  if (branch.status === "merged") return yield* refuse(400, `branch '${branch.name}' was merged; revert on main instead`, "branch_merged")
  const edges = yield* history.ancestry(repo.id, [hash, branch.head])
  if (!MergeBase.isAncestor(hash, branch.head, (h) => edges.get(h), MergeBase.generationsOf(edges))) {
    return yield* refuse(409, `commit ${hash} is no longer in the history of '${branch.name}'`, "not_on_branch")
  }

  const parentHash = target.parent_hash
  const commits = yield* loadCommitHeaders(repo.id, [branch.head, ...(parentHash === null ? [] : [parentHash])])
  const head = commits.get(branch.head)!
  const cache = trees.view(repo.orgId)
  // What the commit changed (parent -> target), then the head at exactly those paths: the cost follows the
  // commit's changes, not the tree's size.
  const changed = yield* cache.resolve((lookup) => TreeDiff.diffTrees(commits.get(parentHash ?? "")?.manifest_hash ?? null, target.manifest_hash, lookup))
  if (!changed.ok) return yield* Effect.die(new Error(`a published manifest refers to a missing tree: ${changed.reason}`))
  const { before, after } = changed
  const touched = [...new Set([...before.keys(), ...after.keys()])].sort()
  if (touched.length === 0) return yield* refuse(400, `commit ${hash} changed no files; there is nothing to revert`, "nothing_to_revert")
  // In a view of its own: a walk reads a tree not loaded yet as empty, so on the first walk's view (the target's
  // trees known, the head's not yet) it compared the target's directories with nothing and read each one under
  // them, untouched ones too (MergeScaling.test). What the first walk read is kept (PlanningTrees): no read again.
  const headView = trees.view(repo.orgId)
  const since = yield* headView.resolve((lookup) => TreeDiff.diffTrees(target.manifest_hash, head.manifest_hash, lookup, touched))
  if (!since.ok) return yield* Effect.die(new Error(`a published manifest refers to a missing tree: ${since.reason}`))
  const current = new Map(touched.flatMap((p) => {
    const file = since.after.get(p)
    return file === undefined ? [] : [[p, file] as const]
  }))
  const changedSince = touched.filter((p) => !same(current.get(p), after.get(p)))
  if (changedSince.length > 0) {
    return yield* refuse(409, `files this commit touched changed since: ${changedSince.slice(0, 10).join(", ")}${changedSince.length > 10 ? ", ..." : ""}`, "revert_conflict", changedSince)
  }
  // At the touched paths only (the rest of the head stays): the parent's version, or none.
  const result = new Map(touched.flatMap((p) => {
    const old = before.get(p)
    return old === undefined ? [] : [[p, old] as const]
  }))
  const message = `Revert "${(target.message ?? hash.slice(0, 12)).split("\n")[0]}"\n\nThis reverts commit ${hash}.`
  const commit = yield* writeCommit(repo, headView, {
    branch: branch.name,
    parent: branch.head,
    mergeParent: null,
    author: actor,
    message,
    beforeRoot: head.manifest_hash,
    before: current,
    after: result
  })
  return { branch: branch.name, head: branch.head, reverted: hash, commit, message } satisfies PlannedRevert
})
