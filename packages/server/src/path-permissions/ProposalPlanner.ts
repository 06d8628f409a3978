/**
 * A proposal of a new `.oak/PERMISSIONS` (or of its deletion) as a push of a new branch off main:
 * one commit whose parent is main's head, changing only that file, built exactly as a client
 * builds one (canonical trees, BLAKE3 hashes, the file list) so the push path verifies it like any
 * other, and a later pull or clone of the branch verifies too.
 */
import { ApiSync } from "@grove/api"
import { Permissions } from "@grove/core"
import * as Snapshots from "@grove/core/merge/Snapshots"
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Commit from "@grove/core/objects/Commit"
import * as FileChanges from "@grove/core/objects/FileChanges"
import * as Timestamp from "@grove/core/objects/Timestamp"
import { Data, Effect } from "effect"
import { Branches } from "../content/Branches.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { makeTreeCache } from "../content/TreeCache.ts"

/** Deleting a file main does not have. */
export class NothingToDelete extends Data.TaggedError("NothingToDelete")<{}> {}

export interface ProposalInput {
  readonly branch: string
  /** The new file, or null to delete it. */
  readonly content: string | null
  readonly description: string
  readonly author: string
}

export const planProposal = Effect.fn("ProposalPlanner.planProposal")(function*(
  repo: { readonly id: string; readonly orgId: string },
  input: ProposalInput
) {
  const objects = yield* ContentObjects
  const branches = yield* Branches
  const head = (yield* branches.get(repo.id, "main"))?.head ?? null
  let before: FileChanges.Snapshot = new Map()
  if (head !== null) {
    const commit = (yield* objects.loadCommitHeaders(repo.id, [head])).get(head)
    if (commit !== undefined) {
      const cache = makeTreeCache(objects, repo.orgId)
      const flat = yield* cache.resolve((lookup) =>
        FileChanges.flattenTree(commit.manifest_hash, (h) => lookup(h) ?? (h === Blake3.EMPTY_HASH ? [] : undefined))
      )
      if (!flat.ok) return yield* Effect.die(new Error(`main's manifest refers to a missing tree: ${flat.reason}`))
      before = flat.files
    }
  }
  const after = new Map(before)
  const blobs: Array<ApiSync.BlobData> = []
  if (input.content === null) {
    if (!after.delete(Permissions.PERMISSIONS_PATH)) return yield* new NothingToDelete()
  } else {
    const bytes = new TextEncoder().encode(input.content)
    const hash = Blake3.hash(bytes)
    after.set(Permissions.PERMISSIONS_PATH, { hash, mode: "regular" })
    blobs.push({ hash, content: Array.from(bytes), size: bytes.length })
  }
  const built = Snapshots.buildTrees(after)
  if (!built.ok) return yield* Effect.die(new Error(`the proposed tree is invalid: ${built.reason}`))
  // Microseconds, as the Oak client stamps its commits.
  const timestamp = (Timestamp.fromDate(new Date()) / 1000n) * 1000n
  const fields = {
    branch_name: input.branch,
    parent_hash: head,
    merge_parent_hash: null,
    manifest_hash: built.root,
    author: input.author,
    message: input.description,
    timestamp
  }
  const hash = Commit.hashCommit(fields)
  const known = yield* objects.repoTrees(repo.id, [...built.trees.keys()])
  const request: ApiSync.PushRequest = {
    expected_head: null,
    expected_branch_head: null,
    force: false,
    branch: {
      name: input.branch,
      description: input.description,
      parent_branch: "main",
      status: "open",
      created_at: Timestamp.formatTimestamp(timestamp),
      close_reason: null
    },
    commits: [{
      ...fields,
      hash,
      timestamp: Timestamp.formatTimestamp(timestamp),
      files: TreeDiff.diffSnapshots(before, after).map(ApiSync.toFileChangeData)
    }],
    blobs,
    trees: [...built.trees].filter(([h]) => !known.has(h)).map(([h, entries]) => ({ hash: h, entries: [...entries] }))
  }
  return { request, commit: hash }
})
