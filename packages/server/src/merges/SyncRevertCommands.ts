/**
 * The Repository entity's Sync and Revert commands: land a planned commit (see
 * SyncPlanner.ts, RevertPlanner.ts) on its branch with a compare-and-set on the
 * branch head, publish it, and emit `push`, in one transaction. A branch that
 * moved since planning answers `branch_moved` and nothing changes.
 */
import { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { RepositoryWritten, repositoryWritten } from "../access/RepositoryRecord.ts"
import { audit, emit, load } from "../entities/CommandSupport.ts"
import { account, BranchNotFound, BranchRepositoryGone, BranchStateInvalid, loadBranch, QuotaExceeded } from "../content/BranchCommands.ts"
import { BranchMoved } from "./MergeCommand.ts"

export const LandError = Schema.Union([BranchRepositoryGone, BranchNotFound, BranchStateInvalid, QuotaExceeded, BranchMoved])
export type LandError = typeof LandError.Type

export const SyncPayload = Schema.Struct({
  branch: Schema.String,
  expectedBranchHead: Schema.String,
  commit: Schema.String,
  mergeParent: Schema.String,
  newTrees: Schema.Array(Schema.String),
  actor: Schema.String
})
export const SyncSuccess = Schema.Struct({
  branch: Schema.String,
  synced: Schema.Boolean,
  head: Schema.NullOr(Schema.String),
  commit_hash: Schema.optionalKey(Schema.String),
  merge_parent_hash: Schema.optionalKey(Schema.String)
})

export const RevertPayload = Schema.Struct({
  branch: Schema.String,
  expectedHead: Schema.String,
  commit: Schema.String,
  reverted: Schema.String,
  message: Schema.String,
  newTrees: Schema.Array(Schema.String),
  actor: Schema.String
})
export const RevertSuccess = Schema.Struct({
  branch: Schema.String,
  commit_hash: Schema.String,
  parent_hash: Schema.String,
  reverted_hash: Schema.String,
  message: Schema.String
})

interface Written {
  readonly version: number
  readonly updatedAt: Date
}

/**
 * Publishes `commit` as the new head of `branch` if the head is still `expected`. Answers the repository and
 * its row as written (the note for the sending node).
 */
const land = Effect.fnUntraced(function*(
  entityId: string,
  branchName: string,
  expected: string,
  commit: string,
  newTrees: ReadonlyArray<string>,
  actor: string
) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* load(entityId)
  if (repo === undefined) return yield* new BranchRepositoryGone({ fullName: entityId })
  const branch = yield* loadBranch(repo.id, branchName)
  if (branch === undefined) return yield* new BranchNotFound({ branch: branchName })
  if (branch.status === "merged") {
    return yield* new BranchStateInvalid({ branch: branchName, message: `branch '${branchName}' was merged`, code: "branch_merged" })
  }
  if (branch.head !== expected) return yield* new BranchMoved({ branch: branchName })
  yield* sql`UPDATE commits SET published = true WHERE repo_id = ${repo.id} AND hash = ${commit}`
  yield* account(repo, { trees: newTrees, blobs: [] })
  const moved = yield* sql`UPDATE branches SET head = ${commit}, updated_at = now(), version = version + 1
    WHERE repo_id = ${repo.id} AND name = ${branchName} AND version = ${branch.version} RETURNING name`
  if (moved.length === 0) return yield* new BranchMoved({ branch: branchName })
  // Every change of the row bumps its version: a record is as new as its version (caches compare them).
  const [written] = yield* (branchName === "main"
    ? sql<Written>`UPDATE repositories SET head = ${commit}, updated_at = now(), version = version + 1
      WHERE id = ${repo.id} RETURNING version, updated_at AS "updatedAt"`
    : sql<Written>`UPDATE repositories SET updated_at = now(), version = version + 1
      WHERE id = ${repo.id} RETURNING version, updated_at AS "updatedAt"`)
  yield* emit("push", {
    event: "push",
    repository_id: repo.id,
    owner: repo.owner,
    repo: repo.name,
    branch: branchName,
    commit,
    pusher: actor,
    timestamp: new Date().toISOString()
  })
  return { repo, written: written === undefined ? undefined : repositoryWritten(written) }
})

const withNote = <A>(success: A, written: RepositoryWritten | undefined) => written === undefined ? success : Entity.noted(success, written)

export const sync = Effect.fn("Repository.sync")(function*(payload: typeof SyncPayload.Type, { entityId }: Entity.CommandContext) {
  const { written } = yield* land(entityId, payload.branch, payload.expectedBranchHead, payload.commit, payload.newTrees, payload.actor)
  const success: typeof SyncSuccess.Type = {
    branch: payload.branch,
    synced: true,
    head: payload.commit,
    commit_hash: payload.commit,
    merge_parent_hash: payload.mergeParent
  }
  return withNote(success, written)
})

export const revert = Effect.fn("Repository.revert")(function*(payload: typeof RevertPayload.Type, { entityId }: Entity.CommandContext) {
  const { repo, written } = yield* land(entityId, payload.branch, payload.expectedHead, payload.commit, payload.newTrees, payload.actor)
  yield* audit(repo.orgId, payload.actor, "commit.revert", `${repo.owner}/${repo.name}`, {
    branch: payload.branch,
    reverted: payload.reverted,
    commit: payload.commit
  })
  const success: typeof RevertSuccess.Type = {
    branch: payload.branch,
    commit_hash: payload.commit,
    parent_hash: payload.expectedHead,
    reverted_hash: payload.reverted,
    message: payload.message
  }
  return withNote(success, written)
})

/** Syncing a branch with main and reverting on main: their slice of the Repository entity. */
export const commands = {
  Sync: { payload: SyncPayload, success: SyncSuccess, error: LandError, note: RepositoryWritten },
  Revert: { payload: RevertPayload, success: RevertSuccess, error: LandError, note: RepositoryWritten }
} as const

export const handlers = { Sync: sync, Revert: revert }
