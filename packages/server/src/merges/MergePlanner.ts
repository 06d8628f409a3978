/**
 * The expensive half of a squash merge, computed outside the Repository
 * entity's one-at-a-time section: the CI gate, merge base, three-way tree
 * merge of main and the branch, the merged trees and the squash commit, written
 * unpublished. The Repository entity's Merge command then lands it with a
 * compare-and-set on both heads (MergeCommand.ts); if either moved meanwhile
 * nothing merges.
 */
import * as MergeBase from "@grove/core/merge/MergeBase"
import type * as ThreeWay from "@grove/core/merge/ThreeWay"
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import * as TreeMerge from "@grove/core/merge/TreeMerge"
import { ApiSync } from "@grove/api"
import * as Blake3 from "@grove/core/objects/Blake3"
import type * as FileChanges from "@grove/core/objects/FileChanges"
import * as Tree from "@grove/core/objects/Tree"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { branchColumns, type BranchRecord } from "../content/BranchRecord.ts"
import { type CommitHeader, commitHeaderColumns, loadCommitHeaders } from "../content/CommitHeaders.ts"
import { type GateRun, gateRunsJson, gateVerdict } from "./CiGate.ts"
import { History } from "../content/History.ts"
import { buildTree, refuse, writeCommit } from "./Landing.ts"
import { PlanningTrees } from "./PlanningTrees.ts"

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

/** The Merge command's payload for a planned merge: the one mapping, for the handler and the tests. */
export const mergePayload = (planned: PlannedMerge, branch: string, actor: string) => ({
  branch,
  expectedMainHead: planned.mainHead,
  expectedBranchHead: planned.branchHead,
  commit: planned.commitHash,
  manifest: planned.manifestHash,
  message: planned.message,
  newTrees: planned.newTrees,
  gateOverridden: planned.gateOverridden,
  actor
})

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

/**
 * Main's head, the merge base with `branchHead`, and the three-way merge of the three manifests at the
 * paths either side changed (TreeMerge: the cost follows the changes, not the tree's size), as the merge
 * and its preview compute them; `no_changes` when main already contains the branch head.
 */
const mergeOfHeads = Effect.fnUntraced(function*(
  repo: { readonly id: string; readonly orgId: string },
  mainHead: string | null,
  branchHead: string,
  /** The heads' headers, when the caller read them already. */
  known: ReadonlyMap<string, CommitHeader> = new Map()
) {
  const trees = yield* PlanningTrees
  const history = yield* History
  const heads = mainHead === null ? [branchHead] : [branchHead, mainHead]
  // The heads' headers (never their file lists: as large as the tree for a first import) go out with the
  // ancestry, in one round trip, unless they were read with the branches; the base is known only from the ancestry.
  const [edges, commits] = yield* Effect.all([
    mainHead === null ? Effect.succeed(undefined) : history.ancestry(repo.id, [mainHead, branchHead], [...known.values()]),
    heads.every((h) => known.has(h)) ? Effect.succeed(known) : loadCommitHeaders(repo.id, heads)
  ], { concurrency: "unbounded" })
  for (const [hash, commit] of commits) trees.rememberManifest(repo.id, hash, commit.manifest_hash)
  const base = mainHead === null || edges === undefined ? null : MergeBase.mergeBase(mainHead, branchHead, (h) => edges.get(h), MergeBase.generationsOf(edges))
  let baseManifest = base === null ? Blake3.EMPTY_HASH : trees.manifest(repo.id, base)
  if (baseManifest === undefined) {
    baseManifest = (yield* loadCommitHeaders(repo.id, [base!])).get(base!)?.manifest_hash ?? Blake3.EMPTY_HASH
    if (baseManifest !== Blake3.EMPTY_HASH) trees.rememberManifest(repo.id, base!, baseManifest)
  }
  const cache = trees.view(repo.orgId)
  const oursRoot = commits.get(mainHead ?? "")?.manifest_hash ?? Blake3.EMPTY_HASH
  const theirsRoot = commits.get(branchHead)!.manifest_hash
  const merged = yield* cache.resolve((lookup) => TreeMerge.mergeTrees(baseManifest, oursRoot, theirsRoot, lookup))
  if (!merged.ok) return yield* Effect.die(new Error(`a published manifest refers to a missing tree: ${merged.reason}`))
  const result = base === branchHead ? "no_changes" as const : merged
  return { base, cache, oursRoot, merged, result }
})

/**
 * The branch's record, main's head, both heads' commit headers, the runs that decide the CI gate on the
 * branch's head and the body of the branch head's root tree: one statement (a statement costs a merge more
 * than its rows do), one snapshot. Main's trees are nearly always kept (PlanningTrees.ts): the branch's
 * root is the tree the merge would otherwise read first, in a statement of its own.
 */
const branchAndMain = Effect.fnUntraced(function*(repo: { readonly id: string; readonly orgId: string }, name: string) {
  const sql = yield* SqlClient.SqlClient
  const trees = yield* PlanningTrees
  const rows = yield* sql<BranchRecord & { readonly header: CommitHeader | null; readonly gate: ReadonlyArray<GateRun> | null; readonly root: string | null }>`
    SELECT ${branchColumns(sql)},
      (SELECT row_to_json(c) FROM (SELECT ${commitHeaderColumns(sql)} FROM commits WHERE repo_id = b.repo_id AND hash = b.head) c) AS header,
      CASE WHEN b.name = ${name} THEN ${gateRunsJson(sql, repo.id, sql`b.head`)} END AS gate,
      CASE WHEN b.name = ${name} THEN (SELECT body FROM trees WHERE org_id = ${repo.orgId}
        AND hash = (SELECT manifest_hash FROM commits WHERE repo_id = b.repo_id AND hash = b.head)) END AS root
    FROM branches b WHERE b.repo_id = ${repo.id} AND b.name IN (${name}, ${MAIN})`
  const found = rows.find((row) => row.name === name)
  const headers = new Map<string, CommitHeader>()
  for (const { header } of rows) if (header !== null) headers.set(header.hash, header)
  if (found !== undefined && found.header !== null && found.root !== null) {
    // Stored bodies were verified on the way in; one that does not decode is left to be read (and refused) as before.
    const entries = Tree.decodeTree(found.root)
    if (entries !== undefined) trees.remember(repo.orgId, found.header.manifest_hash, entries)
  }
  const branch: BranchRecord | undefined = found === undefined ? undefined : withoutExtras(found)
  return { branch, mainHead: rows.find((row) => row.name === MAIN)?.head ?? null, headers, gate: gateVerdict(found?.gate ?? []) }
})

/** The branch record alone (the row carried the planning's extra columns). */
const withoutExtras = (
  { header: _header, gate: _gate, root: _root, ...branch }: BranchRecord & { readonly header: unknown; readonly gate: unknown; readonly root: unknown }
): BranchRecord => branch

/** The merge would leave main's files as they are (`ours` and `result` hold the same paths' versions). */
const unchangedMain = (ours: FileChanges.Snapshot, result: ThreeWay.MergeResult) =>
  result.merged.size === ours.size && [...result.merged].every(([p, f]) => {
    const o = ours.get(p)
    return o !== undefined && o.hash === f.hash && o.mode === f.mode
  })

export const planMerge = Effect.fn("MergePlanner.planMerge")(function*(
  repo: { readonly id: string; readonly orgId: string },
  name: string,
  actor: string,
  force: boolean
) {
  const { branch, mainHead, headers, gate } = yield* branchAndMain(repo, name)
  const branchHead = yield* checkMergeable(branch, name)
  const { cache, oursRoot, result } = yield* mergeOfHeads(repo, mainHead, branchHead, headers)
  if (!gate.open && !force) {
    const what = gate.reason === "running" ? "is still running" : "is failing"
    return yield* refuse(412, `CI ${what} on the branch head (${gate.workflows.join(", ")}); wait for it, fix it, or merge with force=1`, `ci_${gate.reason}`)
  }

  if (result === "no_changes") return yield* refuse(400, `branch '${name}' has no changes that are not on main; close it instead`, "no_changes")
  if (result.conflicts.length > 0) {
    const paths = result.conflicts.map((c) => c.path)
    return yield* refuse(409, `branch '${name}' conflicts with main in ${paths.length} path(s): sync it with main, resolve, push`, "conflict", paths)
  }
  if (unchangedMain(result.ours, result)) return yield* refuse(400, `branch '${name}' has no changes relative to main; close it instead`, "no_changes")

  const message = branch!.description?.trim() || name
  const commit = yield* writeCommit(repo, cache, {
    branch: MAIN,
    parent: mainHead,
    mergeParent: branchHead,
    author: actor,
    message,
    beforeRoot: oursRoot,
    before: result.ours,
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

const PREVIEW_COMMITS = 100

/**
 * What merging the branch would do now, written nowhere (`GET …/branches/{branch}/merge-preview`): the
 * planning of `planMerge` up to the squash commit, with the CI gate reported instead of enforced, the
 * branch's own commits and the files it changes since the merge base.
 */
export const previewMerge = Effect.fn("MergePlanner.previewMerge")(function*(repo: { readonly id: string; readonly orgId: string }, name: string) {
  const history = yield* History
  const sql = yield* SqlClient.SqlClient
  const { branch, mainHead, headers, gate } = yield* branchAndMain(repo, name)
  if (branch === undefined) return yield* refuse(404, `branch '${name}' not found`, "branch_not_found")
  const refused = yield* checkMergeable(branch, name).pipe(
    Effect.as(undefined),
    Effect.catchTag("LandingRefused", (refusal) => Effect.succeed(refusal.message))
  )
  const head = branch.head
  const empty = { branch: name, head, main_head: null, merge_base: null, conflict_paths: [], commits: [], files: [] }
  if (head === null || name === MAIN) {
    return { ...empty, merge: "not_mergeable" as const, reason: refused ?? "nothing to merge", ci: { state: "none" as const, workflows: [] } }
  }
  const [ran] = yield* sql<{ runs: string }>`SELECT count(*)::text AS runs FROM ci_runs WHERE repo_id = ${repo.id} AND commit_hash = ${head}`
  const ci = !gate.open
    ? { state: gate.reason, workflows: gate.workflows }
    : { state: Number(ran?.runs ?? 0) === 0 ? "none" as const : "passed" as const, workflows: [] }
  const { base, cache, merged, oursRoot, result } = yield* mergeOfHeads(repo, mainHead, head, headers)
  const conflictPaths = result === "no_changes" ? [] : result.conflicts.map((c) => c.path)
  const outcome = refused !== undefined
    ? "not_mergeable" as const
    : conflictPaths.length > 0
    ? "conflicts" as const
    : result === "no_changes" || unchangedMain(result.ours, result)
    ? "no_changes" as const
    : "clean" as const
  // A clean merge's tree is built (in memory, as the merge would) to learn whether the merge would refuse it.
  const unbuildable = outcome !== "clean" || result === "no_changes" ? undefined : yield* buildTree(cache, oursRoot, result.ours, result.merged).pipe(
    Effect.as(undefined),
    Effect.catchTag("LandingRefused", (refusal) => Effect.succeed(refusal.message))
  )
  const reason = refused ?? unbuildable
  const merge = unbuildable === undefined ? outcome : "not_mergeable" as const
  const commits = (yield* history.branchCommits(repo.id, name, head)).slice(-PREVIEW_COMMITS).reverse()
  return {
    branch: name,
    head,
    main_head: mainHead,
    merge_base: base,
    merge,
    ...(reason === undefined ? {} : { reason }),
    conflict_paths: conflictPaths,
    ci,
    commits: commits.map((c) => ({ hash: c.hash, author: c.author, timestamp: c.timestamp, message: c.message, files: c.files.length })),
    // Where the branch did not change a path, its version is the base's: the changed paths are all it differs in.
    files: TreeDiff.diffSnapshots(merged.base, merged.theirs).map(ApiSync.toFileChangeData)
  }
})
