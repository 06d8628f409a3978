/**
 * Queuing CI runs is a Branch entity command (`QueueCiRuns`), so it is serialized with the
 * branch's pushes: the exact-head trigger starts runs only while the head is still the expected
 * commit, and its idempotency key is checked and recorded in the same transaction. Runs of an
 * invalid workflow file are recorded as failed at once, with the parser's error.
 */
import { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { emit, load as loadRepository, splitBranchKey, splitRepositoryKey } from "../entities/CommandSupport.ts"
import { BranchNotFound, BranchRepositoryGone, loadBranch } from "../content/BranchCommands.ts"

/** The branch's head is no longer the commit the trigger expected (412). */
export class CiHeadMoved extends Schema.TaggedError<CiHeadMoved>()("CiHeadMoved", { branch: Schema.String, head: Schema.NullOr(Schema.String) }) {}
/** The idempotency key was used for a different request (409). */
export class CiTriggerKeyReused extends Schema.TaggedError<CiTriggerKeyReused>()("CiTriggerKeyReused", { key: Schema.String }) {}
/** Too many runs wait for a runner (503, retryable). */
export class CiQueueFull extends Schema.TaggedError<CiQueueFull>()("CiQueueFull", { queued: Schema.Number }) {}

export const QueueError = Schema.Union([BranchRepositoryGone, BranchNotFound, CiHeadMoved, CiTriggerKeyReused, CiQueueFull])
export type QueueError = typeof QueueError.Type

export const PlannedRun = Schema.Struct({
  workflowName: Schema.String,
  workflowPath: Schema.String,
  /** The parsed workflow (JSON) and its jobs' initial state (JSON); null for an invalid file. */
  workflow: Schema.NullOr(Schema.String),
  jobs: Schema.String,
  /** The parser's error for an invalid file. */
  error: Schema.NullOr(Schema.String)
})
export type PlannedRun = typeof PlannedRun.Type

export const QueuePayload = Schema.Struct({
  event: Schema.Literals(["push", "merge", "manual", "branch.created"]),
  commit: Schema.String,
  /** Start only while the branch's head is `commit` (the exact-head trigger). */
  requireHead: Schema.Boolean,
  trigger: Schema.NullOr(Schema.Struct({ key: Schema.String, fingerprint: Schema.String })),
  /** Refuse when this many runs are already queued; null for automatic triggers, which always queue. */
  queueLimit: Schema.NullOr(Schema.Number),
  triggeredBy: Schema.String,
  runs: Schema.Array(PlannedRun),
  /**
   * A node that reserved a free runner for the first valid run: that run is recorded as started by it in this
   * transaction (what the CiRun entity's Start does for a queued run), and that node runs it once answered.
   * `reservation` is the sending request's own nonce, echoed in the reply: a replayed reply (an Idempotency-Key
   * sent again) names the first request's, so a retry never runs the run a second time. Applied after `until`
   * (epoch ms; the sender stopped following the answer), the run is only queued.
   */
  startOn: Schema.optionalKey(Schema.NullOr(Schema.Struct({ node: Schema.String, reservation: Schema.String, until: Schema.Number })))
})

export const Queued = Schema.Struct({
  run_ids: Schema.Array(Schema.Number),
  replayed: Schema.Boolean,
  commit: Schema.String,
  /** The run started by `startOn`'s runner, if any, and that request's `reservation`. */
  started: Schema.optionalKey(Schema.Number),
  reservation: Schema.optionalKey(Schema.String)
})
export type Queued = typeof Queued.Type

/** The run this reply started for the request that reserved `reservation` (undefined: none, or another request's). */
export const startedFor = (queued: Queued, reservation: string): number | undefined =>
  queued.reservation === reservation ? queued.started : undefined

/**
 * The repository and the branch, both locked as the Branch commands lock them (CommandSupport.load, loadBranch),
 * and with `count`, how many runs are queued, in one statement; undefined when either is missing (the caller then
 * loads them apart, to say which).
 */
const loadTarget = Effect.fnUntraced(function*(repoKey: string, branchName: string, count: boolean) {
  const sql = yield* SqlClient.SqlClient
  const [owner, name] = splitRepositoryKey(repoKey)
  const queued = count ? sql`, (SELECT count(*) FROM ci_runs WHERE status = 'queued')::text AS queued` : sql``
  const rows = yield* sql<{ id: string; owner: string; name: string; head: string | null; queued?: string }>`SELECT r.id, o.slug AS owner,
      r.name, b.head ${queued}
    FROM repositories r JOIN organizations o ON o.id = r.org_id JOIN branches b ON b.repo_id = r.id AND b.name = ${branchName}
    WHERE o.slug = ${owner} AND lower(r.name) = ${name} FOR UPDATE OF r, b`
  return rows[0]
})

const queue = Effect.fn("Branch.queueCiRuns")(function*(payload: typeof QueuePayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const [repoKey, branchName] = splitBranchKey(entityId)
  const reserved = payload.startOn != null && Date.now() <= payload.startOn.until ? payload.startOn : undefined
  // A single run that starts at once on the reserved runner adds nothing to the queue: no count needed.
  const startsAtOnce = reserved !== undefined && payload.runs.length === 1 && payload.runs[0]!.error === null
  const limited = payload.queueLimit !== null && !startsAtOnce
  // Both found (the usual case): one statement, with the queue's count when it is limited.
  const found = yield* loadTarget(repoKey, branchName, limited)
  const repo = found ?? (yield* loadRepository(repoKey))
  if (repo === undefined) return yield* new BranchRepositoryGone({ fullName: repoKey })
  if (payload.trigger !== null) {
    const seen = yield* sql<{ fingerprint: string; run_ids: unknown; commit_hash: string }>`SELECT fingerprint, run_ids, commit_hash
      FROM ci_triggers WHERE repo_id = ${repo.id} AND idempotency_key = ${payload.trigger.key}`
    if (seen[0] !== undefined) {
      if (seen[0].fingerprint !== payload.trigger.fingerprint) return yield* new CiTriggerKeyReused({ key: payload.trigger.key })
      const ids = typeof seen[0].run_ids === "string" ? JSON.parse(seen[0].run_ids) : seen[0].run_ids
      return { run_ids: ids as ReadonlyArray<number>, replayed: true, commit: seen[0].commit_hash }
    }
  }
  const branch = found ?? (yield* loadBranch(repo.id, branchName))
  if (branch === undefined) return yield* new BranchNotFound({ branch: branchName })
  if (payload.requireHead && branch.head !== payload.commit) return yield* new CiHeadMoved({ branch: branchName, head: branch.head })
  // Counted by loadTarget (the branch was found, so it was that statement's).
  if (payload.queueLimit !== null && limited) {
    const queued = Number(found?.queued ?? 0)
    if (queued + payload.runs.length > payload.queueLimit) return yield* new CiQueueFull({ queued })
  }
  const ids: Array<number> = []
  let started: number | undefined
  for (const run of payload.runs) {
    const invalid = run.error !== null
    // A new row: no other writer can hold it, so it is created started, as Start would leave it (single writer kept).
    const startOn = !invalid && started === undefined && reserved !== undefined ? reserved.node : null
    // Stamped by the database's clock, the one the lost-run sweeper compares with.
    const stamp = (on: boolean) => on ? sql`now()` : null
    const [row] = yield* sql<{ id: string; at: Date | string }>`INSERT INTO ci_runs (repo_id, workflow_name, workflow_path, event, branch,
        commit_hash, triggered_by, status, conclusion, error, workflow, jobs, finished_at, started_at, runner_node, heartbeat_at)
      VALUES (${repo.id}, ${run.workflowName}, ${run.workflowPath}, ${payload.event}, ${branchName}, ${payload.commit},
        ${payload.triggeredBy}, ${invalid ? "completed" : startOn === null ? "queued" : "running"}, ${invalid ? "failure" : null}, ${run.error},
        ${run.workflow}, ${run.jobs}, ${stamp(invalid)}, ${stamp(startOn !== null)}, ${startOn}, ${stamp(startOn !== null)})
      RETURNING id::int8::text AS id, now() AS at`
    const id = Number(row!.id)
    ids.push(id)
    const event = {
      run_id: id,
      repository_id: repo.id,
      owner: repo.owner,
      repo: repo.name,
      workflow: run.workflowName,
      event: payload.event,
      branch: branchName,
      commit: payload.commit,
      status: invalid ? "completed" : "queued",
      ...(invalid ? { conclusion: "failure" } : {}),
      timestamp: new Date(row!.at).toISOString()
    }
    yield* emit(invalid ? "ci.run.completed" : "ci.run.queued", event)
    if (startOn !== null) {
      started = id
      yield* emit("ci.run.started", { ...event, status: "running", node: startOn })
    }
  }
  if (payload.trigger !== null) {
    yield* sql`INSERT INTO ci_triggers ${
      sql.insert({
        repo_id: repo.id,
        idempotency_key: payload.trigger.key,
        fingerprint: payload.trigger.fingerprint,
        branch: branchName,
        commit_hash: payload.commit,
        run_ids: JSON.stringify(ids)
      })
    }`
  }
  return { run_ids: ids, replayed: false, commit: payload.commit, ...(started === undefined ? {} : { started, reservation: reserved!.reservation }) }
})

export const commands = {
  QueueCiRuns: { payload: QueuePayload, success: Queued, error: QueueError }
} as const

export const handlers = { QueueCiRuns: queue }
