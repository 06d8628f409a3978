/**
 * The CiRun entity (key `owner/name#<run id>`, on its repository's partition): every change of a
 * run's state is one of these commands, one transaction each, with a compare-and-set on the
 * run's version, an outbox event (`ci.run.started`, `ci.run.completed`) and, where a person or
 * a failure decided the outcome (cancel, lost runner), an audit row.
 */
import { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { audit, emit } from "../entities/CommandSupport.ts"
import { ciRunColumns, type CiRunRecord, fromRow, runIdOf } from "./CiRecord.ts"

export class CiRunNotFound extends Schema.TaggedError<CiRunNotFound>()("CiRunNotFound", { runId: Schema.Number }) {}
/** The run is not in the state the command needs (another node started it; it already finished). */
export class CiRunStateInvalid extends Schema.TaggedError<CiRunStateInvalid>()("CiRunStateInvalid", {
  runId: Schema.Number,
  status: Schema.String,
  conclusion: Schema.NullOr(Schema.String)
}) {}
export const CiRunError = Schema.Union([CiRunNotFound, CiRunStateInvalid])
export type CiRunError = typeof CiRunError.Type

const ConclusionSchema = Schema.Literals(["success", "failure", "cancelled", "timed_out", "skipped"])

/**
 * `until` (epoch ms): applied after it, the run is not started (the sender stopped following an answer that did
 * not come, and gave its runner back); it stays queued for the next claim.
 */
export const StartPayload = Schema.Struct({ node: Schema.String, until: Schema.optionalKey(Schema.Number) })
/** `jobs` is the JSON of the run's JobState array (see CiRecord). */
export const ProgressPayload = Schema.Struct({ node: Schema.String, jobs: Schema.String })
export const FinishPayload = Schema.Struct({
  node: Schema.String,
  jobs: Schema.String,
  conclusion: ConclusionSchema,
  error: Schema.NullOr(Schema.String)
})
export const CancelPayload = Schema.Struct({ actor: Schema.String })
/** Sent by a sweeper: fails the run if its runner's last heartbeat (`ci_runner_heartbeats`) is still the one the sweeper saw. */
export const FailLostPayload = Schema.Struct({ heartbeatAt: Schema.String, reason: Schema.String })

export const RunState = Schema.Struct({
  id: Schema.Number,
  status: Schema.Literals(["queued", "running", "completed"]),
  conclusion: Schema.NullOr(ConclusionSchema)
})
export type RunState = typeof RunState.Type

const state = (run: CiRunRecord): RunState => ({ id: run.id, status: run.status, conclusion: run.conclusion })

interface RepositoryNames {
  readonly orgId: string
  readonly owner: string
  readonly name: string
}

/** The run's repository's names (one JSON row; null once the repository is gone), for its events and audit rows. */
const repositoryNames = (sql: SqlClient.SqlClient) =>
  sql`(SELECT json_build_object('orgId', r.org_id::text, 'owner', o.slug, 'name', r.name)::text
    FROM repositories r JOIN organizations o ON o.id = r.org_id WHERE r.id = ci_runs.repo_id) AS "repoNames"`

const loaded = (row: Record<string, unknown>): LoadedRun => ({
  ...fromRow(row),
  repo: typeof row.repoNames === "string" ? JSON.parse(row.repoNames) as RepositoryNames : undefined
})

/** The run, locked, with its repository's names (one statement). */
const loadRun = Effect.fnUntraced(function*(entityId: string) {
  const sql = yield* SqlClient.SqlClient
  const runId = runIdOf(entityId)
  const rows = yield* sql<Record<string, unknown>>`SELECT ${ciRunColumns(sql)}, ${repositoryNames(sql)} FROM ci_runs WHERE id = ${runId} FOR UPDATE`
  if (rows[0] === undefined) return yield* new CiRunNotFound({ runId })
  return loaded(rows[0])
})

type LoadedRun = CiRunRecord & { readonly repo: RepositoryNames | undefined }

/** Columns a command stamps with the database's clock, the one the lost-run sweeper compares with. */
type Stamped = "started_at" | "heartbeat_at" | "finished_at"

const stamps = (sql: SqlClient.SqlClient, stamped: ReadonlyArray<Stamped>) => sql.literal(stamped.map((column) => `, ${column} = now()`).join(""))

/** Applies `changes`, and sets `stamped` to now(), with a compare-and-set on the version the command read. */
const updateRun = Effect.fnUntraced(function*(run: LoadedRun, changes: Record<string, unknown>, stamped: ReadonlyArray<Stamped> = []) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<Record<string, unknown>>`UPDATE ci_runs SET ${sql.update(changes)}${stamps(sql, stamped)}, version = version + 1
    WHERE id = ${run.id} AND version = ${run.version} RETURNING ${ciRunColumns(sql)}`
  // The row is locked FOR UPDATE in this transaction: a lost compare-and-set is a bug; retry the command.
  if (rows[0] === undefined) return yield* Effect.die(new Error(`CI run ${run.id} changed under its own command`))
  return { ...fromRow(rows[0]), repo: run.repo }
})

/**
 * The common case of a transition in one statement: applies `changes` if the run is `status` on `node` (the
 * compare-and-set), and answers the run as changed; undefined when it is not, and the command reads it to decide.
 */
const transition = Effect.fnUntraced(function*(
  entityId: string,
  expected: { readonly status: "queued" | "running"; readonly node?: string },
  changes: Record<string, unknown>,
  stamped: ReadonlyArray<Stamped>
) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<Record<string, unknown>>`UPDATE ci_runs SET ${sql.update(changes)}${stamps(sql, stamped)}, version = version + 1
    WHERE id = ${runIdOf(entityId)} AND status = ${expected.status} ${expected.node === undefined ? sql`` : sql`AND runner_node = ${expected.node}`}
    RETURNING ${ciRunColumns(sql)}, ${repositoryNames(sql)}`
  return rows[0] === undefined ? undefined : loaded(rows[0])
})

const emitRun = Effect.fnUntraced(function*(type: string, run: LoadedRun, extra: Record<string, unknown> = {}) {
  const repo = run.repo
  yield* emit(type, {
    run_id: run.id,
    repository_id: run.repoId,
    ...(repo === undefined ? {} : { owner: repo.owner, repo: repo.name }),
    workflow: run.workflowName,
    event: run.event,
    branch: run.branch,
    commit: run.commitHash,
    status: run.status,
    ...(run.conclusion === null ? {} : { conclusion: run.conclusion }),
    timestamp: new Date().toISOString(),
    ...extra
  })
  return repo
})

const start = Effect.fn("CiRun.start")(function*(payload: typeof StartPayload.Type, { entityId }: Entity.CommandContext) {
  const late = payload.until !== undefined && Date.now() > payload.until
  const started = late ? undefined : yield* transition(entityId, { status: "queued" }, { status: "running", runner_node: payload.node }, ["started_at", "heartbeat_at"])
  if (started === undefined) {
    const run = yield* loadRun(entityId)
    return yield* new CiRunStateInvalid({ runId: run.id, status: run.status, conclusion: run.conclusion })
  }
  yield* emitRun("ci.run.started", started, { node: payload.node })
  return state(started)
})

/**
 * A runner's report on a run that no longer runs on its node: completed meanwhile (cancelled, failed as lost),
 * its conclusion is kept and what the steps did is recorded; anything else is not this node's run.
 */
const recordEnded = Effect.fnUntraced(function*(entityId: string, payload: { readonly node: string; readonly jobs: string }) {
  const run = yield* loadRun(entityId)
  if (run.runnerNode !== payload.node || run.status !== "completed") {
    return yield* new CiRunStateInvalid({ runId: run.id, status: run.status, conclusion: run.conclusion })
  }
  return state(yield* updateRun(run, { jobs: payload.jobs }))
})

/** Records the jobs' progress; answers the run's state, so the runner learns of a cancel. */
const progress = Effect.fn("CiRun.progress")(function*(payload: typeof ProgressPayload.Type, { entityId }: Entity.CommandContext) {
  const running = yield* transition(entityId, { status: "running", node: payload.node }, { jobs: payload.jobs }, ["heartbeat_at"])
  if (running !== undefined) return state(running)
  return yield* recordEnded(entityId, payload)
})

const finish = Effect.fn("CiRun.finish")(function*(payload: typeof FinishPayload.Type, { entityId }: Entity.CommandContext) {
  const completed = { jobs: payload.jobs, status: "completed", conclusion: payload.conclusion, error: payload.error }
  const done = yield* transition(entityId, { status: "running", node: payload.node }, completed, ["finished_at"])
  if (done !== undefined) {
    yield* emitRun("ci.run.completed", done)
    return state(done)
  }
  return yield* recordEnded(entityId, payload)
})

/** Marks every unfinished job and step cancelled. */
const cancelJobs = (run: LoadedRun, conclusion: "cancelled" | "failure") =>
  JSON.stringify(run.jobs.map((job) =>
    job.status === "completed" ? job : {
      ...job,
      status: "completed",
      conclusion,
      steps: job.steps.map((step) => step.status === "completed" ? step : { ...step, status: "completed", conclusion })
    }
  ))

const cancel = Effect.fn("CiRun.cancel")(function*(payload: typeof CancelPayload.Type, { entityId }: Entity.CommandContext) {
  const run = yield* loadRun(entityId)
  if (run.status === "completed") return yield* new CiRunStateInvalid({ runId: run.id, status: run.status, conclusion: run.conclusion })
  const cancelled = yield* updateRun(run, {
    status: "completed",
    conclusion: "cancelled",
    ...(run.status === "queued" ? { jobs: cancelJobs(run, "cancelled") } : {})
  }, ["finished_at"])
  const repo = yield* emitRun("ci.run.completed", cancelled, { actor: payload.actor })
  if (repo !== undefined) {
    yield* audit(repo.orgId, payload.actor, "ci.run.cancel", `${repo.owner}/${repo.name}`, { run_id: run.id, workflow: run.workflowName, was: run.status })
  }
  return state(cancelled)
})

const failLost = Effect.fn("CiRun.failLost")(function*(payload: typeof FailLostPayload.Type, { entityId }: Entity.CommandContext) {
  const sql = yield* SqlClient.SqlClient
  const run = yield* loadRun(entityId)
  // The runner's own heartbeat row (CiHeartbeats), or the run's start when no runner ever beat for it.
  const beats = yield* sql<{ heartbeat_at: Date | string }>`SELECT heartbeat_at FROM ci_runner_heartbeats WHERE run_id = ${run.id}`
  const lastBeat = beats[0] === undefined ? run.startedAt : new Date(beats[0].heartbeat_at)
  // Its runner beat again since the sweeper looked, or it finished: nothing to do.
  if (run.status !== "running" || lastBeat === null || lastBeat.getTime() > new Date(payload.heartbeatAt).getTime()) {
    return state(run)
  }
  const failed = yield* updateRun(run, {
    status: "completed",
    conclusion: "failure",
    error: payload.reason,
    jobs: cancelJobs(run, "failure")
  }, ["finished_at"])
  const repo = yield* emitRun("ci.run.completed", failed)
  if (repo !== undefined) {
    yield* audit(repo.orgId, "system", "ci.run.lost", `${repo.owner}/${repo.name}`, { run_id: run.id, node: run.runnerNode, reason: payload.reason })
  }
  return state(failed)
})

export const CiRunEntity = Entity.make("CiRun", {
  Start: { payload: StartPayload, success: RunState, error: CiRunError },
  Progress: { payload: ProgressPayload, success: RunState, error: CiRunError },
  Finish: { payload: FinishPayload, success: RunState, error: CiRunError },
  Cancel: { payload: CancelPayload, success: RunState, error: CiRunError },
  FailLost: { payload: FailLostPayload, success: RunState, error: CiRunError }
}, { partitionKey: (entityId) => entityId.slice(0, entityId.lastIndexOf("#")) })

export const handlers: Entity.Handlers<typeof CiRunEntity> = {
  Start: start,
  Progress: progress,
  Finish: finish,
  Cancel: cancel,
  FailLost: failLost
}
