/**
 * The Repository entity's Merge command: lands a planned squash merge (see
 * MergePlanner.ts) with a compare-and-set on main's head and the branch's head
 * in one transaction, together with publication of the squash commit, the
 * branch's end (merged), the `merge` outbox event and the audit row: the
 * repository's lock and every write are one statement. If either head moved
 * since planning, nothing merges and the caller retries.
 */
import { Entity, Outbox, type OutboxRelay } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { type RepositoryRecord, RepositoryWritten, repositoryWritten } from "../access/RepositoryRecord.ts"
import { load, splitRepositoryKey } from "../entities/CommandSupport.ts"
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
  /** The squash commit's trees of its changed directories (small); the repository reaches them once it lands. */
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
 * Everything the merge does, as ONE statement: the repository row locked for the command (by its entity key),
 * then each write, with a compare-and-set on what planning read: main's head (or its absence) and the
 * branch's head while open. Each write waits on the one before it, so when either head moved (or the
 * repository is gone) nothing is written at all and the caller finds out why (`refusal`). A row changed by
 * another transaction in between fails the later condition: the command then fails and rolls back.
 */
const land = Effect.fnUntraced(function*(entityId: string, payload: typeof MergePayload.Type) {
  const sql = yield* SqlClient.SqlClient
  const [owner, name] = splitRepositoryKey(entityId)
  // The repository's id, owner and name come from the locked row, in the statement.
  const outbox = yield* Outbox.Outbox
  const event = outbox.row({
    type: "merge",
    v: 1,
    event: "merge",
    branch: payload.branch,
    commit: payload.commit,
    tree: payload.manifest,
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
  const rows = yield* sql<{
    landed: boolean
    version: number | null
    updatedAt: Date | null
    eventRow: string | null
    eventPayload: OutboxRelay.RelayedRow["payload"] | null
  }>`WITH
    repo AS (SELECT r.id, r.org_id, o.slug AS owner, r.name FROM repositories r JOIN organizations o ON o.id = r.org_id
      WHERE o.slug = ${owner} AND lower(r.name) = ${name} FOR UPDATE OF r),
    open AS (SELECT 1 FROM branches
      WHERE repo_id = (SELECT id FROM repo) AND name = ${payload.branch} AND status = 'open' AND head = ${payload.expectedBranchHead}),
    main_moved AS (UPDATE branches SET head = ${payload.commit}, pushed_at = coalesce(pushed_at, now()), updated_at = now(), version = version + 1
      WHERE repo_id = (SELECT id FROM repo) AND name = 'main' AND head IS NOT DISTINCT FROM ${payload.expectedMainHead}::text
        AND EXISTS (SELECT 1 FROM open) RETURNING 1),
    main_created AS (INSERT INTO branches (repo_id, name, status, head, created_by, created_at, pushed_at)
      SELECT repo.id, 'main', 'open', ${payload.commit}::text, ${payload.actor}::text, ${nowRfc3339()}::text, now() FROM repo
      WHERE ${payload.expectedMainHead}::text IS NULL AND NOT EXISTS (SELECT 1 FROM branches b WHERE b.repo_id = repo.id AND b.name = 'main')
        AND EXISTS (SELECT 1 FROM open) RETURNING 1),
    ended AS (UPDATE branches SET status = 'merged', updated_at = now(), version = version + 1
      WHERE repo_id = (SELECT id FROM repo) AND name = ${payload.branch} AND status = 'open' AND head = ${payload.expectedBranchHead}
        AND EXISTS (SELECT 1 FROM main_moved UNION ALL SELECT 1 FROM main_created) RETURNING 1),
    published AS (UPDATE commits SET published = true
      WHERE repo_id = (SELECT id FROM repo) AND hash = ${payload.commit} AND EXISTS (SELECT 1 FROM ended) RETURNING 1),
    reached AS (INSERT INTO repo_trees (repo_id, tree_hash)
      SELECT repo.id, unnest(${[...payload.newTrees]}::text[]) FROM repo WHERE EXISTS (SELECT 1 FROM ended)
      ON CONFLICT DO NOTHING RETURNING 1),
    headed AS (UPDATE repositories SET head = ${payload.commit}, updated_at = now(), version = version + 1
      WHERE id = (SELECT id FROM repo) AND EXISTS (SELECT 1 FROM ended) RETURNING version, updated_at),
    audited AS (INSERT INTO audit_log (org_id, actor, action, target, details)
      SELECT repo.org_id, ${payload.actor}::text, ${payload.gateOverridden ? "branch.merge.forced" : "branch.merge"}::text,
        repo.owner || '/' || repo.name, ${JSON.stringify(details)}::jsonb
      FROM repo WHERE EXISTS (SELECT 1 FROM ended) RETURNING 1),
    emitted AS (INSERT INTO event_outbox (event_id, partition, topic, key, payload)
      SELECT ${event.eventId}::uuid, ${event.partition}::int, ${event.topic}::text, ${event.key}::text,
        ${event.payload}::jsonb || jsonb_build_object('repository_id', repo.id, 'owner', repo.owner, 'repo', repo.name)
      FROM repo WHERE EXISTS (SELECT 1 FROM ended) RETURNING id, payload)
    SELECT EXISTS (SELECT 1 FROM ended) AS landed, (SELECT version FROM headed) AS version, (SELECT updated_at FROM headed) AS "updatedAt",
      (SELECT id::text FROM emitted) AS "eventRow", (SELECT payload FROM emitted) AS "eventPayload"`
  const row = rows[0]
  if (row?.landed !== true) return { landed: false, repository: undefined } as const
  // The event as stored: the reply's statement need not read it back for the relay.
  if (row.eventRow !== null && row.eventPayload !== null) {
    outbox.stored({ id: row.eventRow, eventId: event.eventId, topic: event.topic, key: event.key, payload: row.eventPayload })
  }
  return {
    landed: true,
    repository: row.version === null || row.updatedAt === null ? undefined : repositoryWritten({ version: row.version, updatedAt: row.updatedAt })
  } as const
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

/**
 * One statement when it lands: the repository under the command's lock and the landing with its event. Its
 * note: the repository row as the merge left it, for the sending node's cache.
 */
export const merge = Effect.fn("Repository.merge")(function*(payload: typeof MergePayload.Type, { entityId }: Entity.CommandContext) {
  const { landed, repository } = yield* land(entityId, payload)
  if (!landed) {
    const repo = yield* load(entityId)
    if (repo === undefined) return yield* new BranchRepositoryGone({ fullName: entityId })
    return yield* refusal(repo, payload)
  }
  const success: MergeSuccess = {
    message: payload.message,
    commit_hash: payload.commit,
    manifest_hash: payload.manifest,
    ...(payload.expectedMainHead === null ? {} : { parent_hash: payload.expectedMainHead }),
    merge_parent_hash: payload.expectedBranchHead
  }
  return repository === undefined ? success : Entity.noted(success, repository)
})

/** The merge's slice of the Repository entity; `Entities.ts` composes the entity from the slices. */
export const commands = {
  Merge: { payload: MergePayload, success: MergeSuccess, error: MergeError, note: RepositoryWritten }
} as const

export const handlers = { Merge: merge }
