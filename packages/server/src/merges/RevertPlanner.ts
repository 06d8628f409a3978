/**
 * Planning `POST /{owner}/{name}/commits/{hash}/revert`: a commit on the
 * reverted commit's branch that puts back every file the commit changed (on
 * main: undoes the squash). Refused with 409 and the paths when any of those
 * files changed since. The Revert command lands it with a compare-and-set on
 * the branch head.
 */
import * as MergeBase from "@grove/core/merge/MergeBase"
import * as Blake3 from "@grove/core/objects/Blake3"
import type * as FileChanges from "@grove/core/objects/FileChanges"
import { Effect } from "effect"
import { Branches } from "../content/Branches.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { History } from "../content/History.ts"
import { type ComputedCommit, refuse, snapshotOf, writeCommit } from "./Landing.ts"
import { makeTreeCache } from "../content/TreeCache.ts"

export interface PlannedRevert {
  readonly branch: string
  readonly head: string
  readonly reverted: string
  readonly commit: ComputedCommit
  readonly message: string
}

type File = { readonly hash: string; readonly mode: string }
const same = (a: File | undefined, b: File | undefined) => a === b || (a !== undefined && b !== undefined && a.hash === b.hash && a.mode === b.mode)

export const planRevert = Effect.fn("RevertPlanner.planRevert")(function*(
  repo: { readonly id: string; readonly orgId: string },
  hash: string,
  actor: string
) {
  const branches = yield* Branches
  const objects = yield* ContentObjects
  const history = yield* History
  if (!Blake3.isHash(hash)) return yield* refuse(400, "the commit must be a 64-character lowercase hex hash", "invalid_hash")
  const target = (yield* objects.loadCommits(repo.id, [hash])).get(hash)
  if (target === undefined || !target.published) return yield* refuse(404, `commit ${hash} not found`, "commit_not_found")
  const branch = yield* branches.get(repo.id, target.branch_name)
  if (branch === undefined || branch.head === null) {
    return yield* refuse(404, `branch '${target.branch_name}' of commit ${hash} not found`, "branch_not_found")
  }
  if (branch.status === "merged") return yield* refuse(400, `branch '${branch.name}' was merged; revert on main instead`, "branch_merged")
  const edges = yield* history.ancestry(repo.id, [hash, branch.head])
  if (!MergeBase.isAncestor(hash, branch.head, (h) => edges.get(h))) {
    return yield* refuse(409, `commit ${hash} is no longer in the history of '${branch.name}'`, "not_on_branch")
  }

  const parent = target.parent_hash === null ? undefined : (yield* objects.loadCommits(repo.id, [target.parent_hash])).get(target.parent_hash)
  const head = (yield* objects.loadCommits(repo.id, [branch.head])).get(branch.head)!
  const cache = makeTreeCache(objects, repo.orgId)
  const before = yield* snapshotOf(cache, parent?.manifest_hash ?? Blake3.EMPTY_HASH)
  const after = yield* snapshotOf(cache, target.manifest_hash)
  const current = yield* snapshotOf(cache, head.manifest_hash)

  const touched = [...new Set([...before.keys(), ...after.keys()])].filter((p) => !same(before.get(p), after.get(p))).sort()
  if (touched.length === 0) return yield* refuse(400, `commit ${hash} changed no files; there is nothing to revert`, "nothing_to_revert")
  const changedSince = touched.filter((p) => !same(current.get(p), after.get(p)))
  if (changedSince.length > 0) {
    return yield* refuse(409, `files this commit touched changed since: ${changedSince.slice(0, 10).join(", ")}${changedSince.length > 10 ? ", ..." : ""}`, "revert_conflict", changedSince)
  }
  const result = new Map(current) as Map<string, FileChanges.Snapshot extends ReadonlyMap<string, infer F> ? F : never>
  for (const p of touched) {
    const old = before.get(p)
    if (old === undefined) result.delete(p)
    else result.set(p, old)
  }
  const message = `Revert "${(target.message ?? hash.slice(0, 12)).split("\n")[0]}"\n\nThis reverts commit ${hash}.`
  const commit = yield* writeCommit(repo, cache, {
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
