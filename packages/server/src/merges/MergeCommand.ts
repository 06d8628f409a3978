/**
 * The Repository entity's Merge command: lands a planned squash merge (see
 * MergePlanner.ts) with a compare-and-set on main's head and the branch's head
 * in one transaction, together with publication of the squash commit, the
 * branch's end (merged), the `merge` outbox event and the audit row, all written
 * by one statement. If either head moved since planning, nothing merges and the
 * caller retries.
 */
import { type Entity, Outbox } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { RepositoryRecord } from "../access/RepositoryRecord.ts"
import { load } from "../entities/CommandSupport.ts"
import { BranchNotFound, BranchRepositoryGone, BranchStateInvalid, loadBranch, nowRfc3339, QuotaExceeded } from "../content/BranchCommands.ts"

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

/**
 * Everything the merge writes, as ONE statement whose compare-and-set is on what planning read: main's head
 * (or its absence) and the branch's head while open. Each write waits on the one before it, so when either
 * head moved nothing is written at all and the caller finds out why (`refusal`). A row changed by another
 * transaction in between fails the later condition: the command then fails and its savepoint is rolled back.
 */
const land = Effect.fnUntraced(function*(repo: RepositoryRecord, payload: typeof MergePayload.Type) {
  const sql = yield* SqlClient.SqlClient
  const event = (yield* Outbox.Outbox).row({
    type: "merge",
    v: 1,
    event: "merge",
    repository_id: repo.id,
    owner: repo.owner,
    repo: repo.name,
    branch: payload.branch,
    commit: payload.commit,
    pusher: payload.actor,
    timestamp: new Date().toISOString()
  })
  const details = {
    branch: payload.branch,
    commit: payload.commit,
    merge_parent: payload.expectedBranchHead,
    ...(payload.gateOverridden ? { ci_gate_overridden: true } : {})
  }
  // Every data-modifying part of a WITH runs, so each one's condition is the one before it having written.
  const rows = yield* sql<{ landed: boolean }>`WITH
    open AS (SELECT 1 FROM branches
      WHERE repo_id = ${repo.id} AND name = ${payload.branch} AND status = 'open' AND head = ${payload.expectedBranchHead}),
    main_moved AS (UPDATE branches SET head = ${payload.commit}, pushed_at = coalesce(pushed_at, now()), updated_at = now(), version = version + 1
      WHERE repo_id = ${repo.id} AND name = 'main' AND head IS NOT DISTINCT FROM ${payload.expectedMainHead}::text
        AND EXISTS (SELECT 1 FROM open) RETURNING 1),
    main_created AS (INSERT INTO branches (repo_id, name, status, head, created_by, created_at, pushed_at)
      SELECT ${repo.id}::uuid, 'main', 'open', ${payload.commit}::text, ${payload.actor}::text, ${nowRfc3339()}::text, now()
      WHERE ${payload.expectedMainHead}::text IS NULL AND NOT EXISTS (SELECT 1 FROM branches WHERE repo_id = ${repo.id} AND name = 'main')
        AND EXISTS (SELECT 1 FROM open) RETURNING 1),
    ended AS (UPDATE branches SET status = 'merged', updated_at = now(), version = version + 1
      WHERE repo_id = ${repo.id} AND name = ${payload.branch} AND status = 'open' AND head = ${payload.expectedBranchHead}
        AND EXISTS (SELECT 1 FROM main_moved UNION ALL SELECT 1 FROM main_created) RETURNING 1),
    published AS (UPDATE commits SET published = true
      WHERE repo_id = ${repo.id} AND hash = ${payload.commit} AND EXISTS (SELECT 1 FROM ended) RETURNING 1),
    reached AS (INSERT INTO repo_trees (repo_id, tree_hash)
      SELECT ${repo.id}::uuid, unnest(${[...payload.newTrees]}::text[]) WHERE EXISTS (SELECT 1 FROM ended)
      ON CONFLICT DO NOTHING RETURNING 1),
    headed AS (UPDATE repositories SET head = ${payload.commit}, updated_at = now(), version = version + 1
      WHERE id = ${repo.id} AND EXISTS (SELECT 1 FROM ended) RETURNING 1),
    audited AS (INSERT INTO audit_log (org_id, actor, action, target, details)
      SELECT ${repo.orgId}::uuid, ${payload.actor}::text, ${payload.gateOverridden ? "branch.merge.forced" : "branch.merge"}::text,
        ${`${repo.owner}/${repo.name}`}::text, ${JSON.stringify(details)}::jsonb
      WHERE EXISTS (SELECT 1 FROM ended) RETURNING 1),
    emitted AS (INSERT INTO event_outbox (event_id, partition, topic, key, payload)
      SELECT ${event.eventId}::uuid, ${event.partition}::int, ${event.topic}::text, ${event.key}::text, ${event.payload}::jsonb
      WHERE EXISTS (SELECT 1 FROM ended) RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM ended) AS landed`
  return rows[0]?.landed === true
})

/** Why a merge whose statement wrote nothing was refused, in the order the checks were always made. */
const refusal = Effect.fnUntraced(function*(repo: RepositoryRecord, payload: typeof MergePayload.Type) {
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
  return yield* new BranchMoved({ branch: payload.branch })
})

/** Two statements when it lands: the repository under the command's lock, and the landing with its event. */
export const merge = Effect.fn("Repository.merge")(function*(payload: typeof MergePayload.Type, { entityId }: Entity.CommandContext) {
  const repo = yield* load(entityId)
  if (repo === undefined) return yield* new BranchRepositoryGone({ fullName: entityId })
  if (!(yield* land(repo, payload))) return yield* refusal(repo, payload)
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
