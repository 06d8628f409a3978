/**
 * What merges, syncs and reverts share before their entity command: their
 * refusal, and writing a computed commit (the trees of the directories it
 * changes and the unpublished commit row) so the command only has to publish
 * it with a compare-and-set.
 */
import { ApiSync } from "@grove/api"
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import * as TreeMerge from "@grove/core/merge/TreeMerge"
import * as Commit from "@grove/core/objects/Commit"
import type * as FileChanges from "@grove/core/objects/FileChanges"
import * as Timestamp from "@grove/core/objects/Timestamp"
import * as Tree from "@grove/core/objects/Tree"
import { Effect, Schema } from "effect"
import { ContentObjects } from "../content/ContentObjects.ts"
import type { TreeCache } from "../content/TreeCache.ts"
import * as TreeRows from "../content/TreeRows.ts"
import { PlanningTrees } from "./PlanningTrees.ts"

/** A merge, sync or revert that cannot be planned; the status is the answer's. */
export class LandingRefused extends Schema.TaggedError<LandingRefused>()("LandingRefused", {
  status: Schema.Literals([400, 404, 409, 412]),
  message: Schema.String,
  code: Schema.String,
  conflictPaths: Schema.optional(Schema.Array(Schema.String))
}) {}

export const refuse = (status: 400 | 404 | 409 | 412, message: string, code: string, conflictPaths?: ReadonlyArray<string>) =>
  Effect.fail(new LandingRefused({ status, message, code, ...(conflictPaths === undefined ? {} : { conflictPaths }) }))

export interface ComputedCommit {
  readonly hash: string
  readonly manifestHash: string
  /** Trees of the commit's changed directories (the repository may reach some already). */
  readonly newTrees: ReadonlyArray<string>
}

/**
 * The trees that turn `before` into `after` (on `beforeRoot`), built in memory: refused when they are invalid or
 * when one of them holds `.grove` in any spelling a checkout takes for it (Tree.isDotGrove), at any depth. Pushes
 * refuse such a tree, but commits stored before that check could still bring one to main (or a branch) through a
 * merge, sync or revert, and the client refuses to check such a tree out. Every directory on the way to a changed
 * path is rebuilt (the root always), so a `.grove` the change brings is among them and looking costs no read; a
 * subtree left as stored was the target's already.
 */
export const buildTree = Effect.fnUntraced(function*(
  cache: TreeCache,
  beforeRoot: string,
  before: FileChanges.Snapshot,
  after: FileChanges.Snapshot
) {
  const edits = TreeMerge.editsBetween(before, after)
  const built = yield* cache.resolve((lookup) => TreeMerge.editTree(beforeRoot, edits, lookup))
  if (!built.ok) return yield* refuse(409, `the resulting tree is invalid: ${built.reason}`, "conflict")
  for (const [hash, entries] of built.trees) {
    const reserved = entries.find((e) => Tree.isDotGrove(e.name))
    if (reserved === undefined) continue
    const dir = hash === built.root ? "" : builtDirPath(built.trees, built.root, edits, hash)
    // The target's own (stored before the check) or the change's: either way, where it is, and that it must go.
    const at = dir === undefined || dir === "" ? "" : ` (at '${dir}/${reserved.name}')`
    return yield* refuse(
      409,
      `the resulting tree${hash === built.root ? "'s root" : ""} would hold ${JSON.stringify(reserved.name)}${at}, which a checkout takes for '.grove' (where grove keeps a checkout's own files): no checkout could take it; remove or rename it on either side first`,
      "invalid_tree"
    )
  }
  return built
})

/**
 * The path of the rebuilt directory `target`: every directory on the way to an edited path is rebuilt, so it is found
 * going down an edited path's directories through `trees` (in memory, no read).
 */
const builtDirPath = (
  trees: ReadonlyMap<string, ReadonlyArray<Tree.TreeEntry>>,
  root: string,
  edits: TreeMerge.TreeEdits,
  target: string
): string | undefined => {
  for (const [path] of edits) {
    let hash = root
    const parts = path.split("/").slice(0, -1)
    for (let i = 0; i < parts.length; i++) {
      const entry = trees.get(hash)?.find((e) => e.name === parts[i] && e.kind === "tree")
      if (entry === undefined) break
      if ((hash = entry.hash) === target) return parts.slice(0, i + 1).join("/")
    }
  }
  return undefined
}

/**
 * Writes the commit that turns `before` into `after` on `branch`: its trees, the unpublished commit row and the
 * list of the trees it built (blobs all come from published snapshots). `before` and
 * `after` may hold only the paths that can differ (the rest is `beforeRoot`'s): only the directories on the way
 * to a changed path are rebuilt, so the cost follows the change, not the tree's size.
 */
export const writeCommit = Effect.fnUntraced(function*(
  repo: { readonly id: string; readonly orgId: string },
  cache: TreeCache,
  options: {
    readonly branch: string
    readonly parent: string | null
    readonly mergeParent: string | null
    readonly author: string
    readonly message: string | null
    /** The manifest `before` is (part of). */
    readonly beforeRoot: string
    readonly before: FileChanges.Snapshot
    readonly after: FileChanges.Snapshot
  }
) {
  const planning = yield* PlanningTrees
  const objects = yield* ContentObjects
  const built = yield* buildTree(cache, options.beforeRoot, options.before, options.after)
  const files = TreeDiff.diffSnapshots(options.before, options.after)
  // Microseconds, as the Oak client stamps its commits.
  const timestamp = (Timestamp.fromDate(new Date()) / 1000n) * 1000n
  const fields = {
    branch_name: options.branch,
    parent_hash: options.parent,
    merge_parent_hash: options.mergeParent,
    manifest_hash: built.root,
    author: options.author,
    message: options.message,
    timestamp
  }
  const hash = Commit.hashCommit(fields)
  // Only the directories on the way to a changed path were built, so nearly all are new: they are written
  // without asking first which the repository reaches (a round trip per merge); a stored one is skipped by
  // the insert, a reached one by the landing's. With the unpublished commit row, in one statement.
  const newTrees = yield* TreeRows.storeTreesWithCommit(repo.orgId, [...built.bodies].map(([h, body]) => ({ hash: h, body })), {
    repoId: repo.id,
    hash,
    fields,
    files: files.map(ApiSync.toFileChangeData)
  })
  // Stored: the next merge's main is this commit, so these are the trees it reads first; and the consumers of
  // the landing's event (the CI trigger) read its root tree through ContentObjects.
  for (const [h, entries] of built.trees) planning.remember(repo.orgId, h, entries)
  yield* objects.rememberTrees(repo.orgId, built.trees)
  const computed: ComputedCommit = { hash, manifestHash: built.root, newTrees }
  return computed
})
