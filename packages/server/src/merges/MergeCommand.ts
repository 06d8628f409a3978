/**
 * The Repository entity's Merge command: lands a planned squash merge (see
 * MergePlanner.ts) with a compare-and-set on main's head and the branch's head
 * in one transaction, together with publication of the squash commit, the
 * branch's end (merged), the `merge` outbox event and the audit row. If either
 * head moved since planning, nothing merges and the caller retries.
 */
import type { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { audit, emit, load } from "../entities/CommandSupport.ts"
import { account, BranchNotFound, BranchRepositoryGone, BranchStateInvalid, loadBranch, QuotaExceeded } from "../content/BranchCommands.ts"

export class MainMoved extends Schema.TaggedError<MainMoved>()("MainMoved", { branch: Schema.String }) {}
export class BranchMoved extends Schema.TaggedError<BranchMoved>()("BranchMoved", { branch: Schema.String }) {}

export const MergeError = Schema.Union([BranchRepositoryGone, BranchNotFound, BranchStateInvalid, QuotaExceeded, MainMoved, BranchMoved])
export type MergeError = typeof MergeError.Type

export const MergePayload = Schema.Struct({
  branch: Schema.String,
  expectedMainHead: Schema.NullOr(Schema.String),
  expectedBranchHead: Schema.String,
  commit: Schema.String,
  manifest: Schema.String,
  message: Schema.String,
  /** The squash commit's trees the repository does not reach yet (only changed directories: small). */
  newTrees: Schema.Array(Schema.String),
  /** The CI gate was closed and force=1 opened it. */
  gateOverridden: Schema.Boolean,
  actor: Schema.String
})

/** The 200 body; the Oak client reads every field. */
export type MergeSuccess = typeof MergeSuccess.Type
export const MergeSuccess = Schema.Struct({
  message: Schema.String,
  commit_hash: Schema.String,
  manifest_hash: Schema.String,
  parent_hash: Schema.optionalKey(Schema.String),
  merge_parent_hash: Schema.String
})

export const merge = Effect.fn("Repository.merge")(function*(payload: typeof MergePayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* load(entityId)
  if (repo === undefined) return yield* new BranchRepositoryGone({ fullName: entityId })
  const branch = yield* loadBranch(repo.id, payload.branch)
  if (branch === undefined) return yield* new BranchNotFound({ branch: payload.branch })
  if (branch.status !== "open") {
    return yield* new BranchStateInvalid({
      branch: payload.branch,
      message: `branch '${payload.branch}' was already ${branch.status === "merged" ? "merged" : "closed"}`,
      code: branch.status === "merged" ? "already_merged" : "branch_closed"
    })
  }
  const main = yield* loadBranch(repo.id, "main")
  if ((main?.head ?? null) !== payload.expectedMainHead) return yield* new MainMoved({ branch: payload.branch })
  if (branch.head !== payload.expectedBranchHead) return yield* new BranchMoved({ branch: payload.branch })

  yield* sql`UPDATE commits SET published = true WHERE repo_id = ${repo.id} AND hash = ${payload.commit}`
  yield* account(repo, { trees: payload.newTrees, blobs: [] })
  if (main === undefined) {
    yield* sql`INSERT INTO branches ${
      sql.insert({ repo_id: repo.id, name: "main", status: "open", head: payload.commit, created_by: payload.actor, created_at: new Date().toISOString().replace("Z", "+00:00"), pushed_at: new Date() })
    }`
  } else {
    const moved = yield* sql`UPDATE branches SET head = ${payload.commit}, pushed_at = coalesce(pushed_at, now()), updated_at = now(), version = version + 1
      WHERE repo_id = ${repo.id} AND name = 'main' AND version = ${main.version} RETURNING name`
    if (moved.length === 0) return yield* new MainMoved({ branch: payload.branch })
  }
  const ended = yield* sql`UPDATE branches SET status = 'merged', updated_at = now(), version = version + 1
    WHERE repo_id = ${repo.id} AND name = ${branch.name} AND version = ${branch.version} RETURNING name`
  if (ended.length === 0) return yield* new BranchMoved({ branch: payload.branch })
  yield* sql`UPDATE repositories SET head = ${payload.commit}, updated_at = now(), version = version + 1 WHERE id = ${repo.id}`
  const fullName = `${repo.owner}/${repo.name}`
  yield* audit(repo.orgId, payload.actor, payload.gateOverridden ? "branch.merge.forced" : "branch.merge", fullName, {
    branch: payload.branch,
    commit: payload.commit,
    merge_parent: payload.expectedBranchHead,
    ...(payload.gateOverridden ? { ci_gate_overridden: true } : {})
  })
  yield* emit("merge", {
    event: "merge",
    repository_id: repo.id,
    owner: repo.owner,
    repo: repo.name,
    branch: payload.branch,
    commit: payload.commit,
    pusher: payload.actor,
    timestamp: new Date().toISOString()
  })
  return {
    message: payload.message,
    commit_hash: payload.commit,
    manifest_hash: payload.manifest,
    ...(payload.expectedMainHead === null ? {} : { parent_hash: payload.expectedMainHead }),
    merge_parent_hash: payload.expectedBranchHead
  }
})

/** The merge's slice of the Repository entity; `Entities.ts` composes the entity from the slices. */
export const commands = {
  Merge: { payload: MergePayload, success: MergeSuccess, error: MergeError }
} as const

export const handlers = { Merge: merge }
