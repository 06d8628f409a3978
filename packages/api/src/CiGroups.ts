/**
 * Native CI (`/{owner}/{name}/ci/...`): runs of the workflows in `.oak/workflows/`, their logs,
 * the exact-head trigger and the repository's secrets. Records have the shape the Oak client
 * reads (integer ids; a run list is a bare array). Reading needs read access; starting,
 * triggering, cancelling and writing secrets need write access.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import {
  BadRequest,
  Conflict,
  Forbidden,
  NotFound,
  OperationPending,
  PayloadTooLarge,
  PreconditionFailed,
  ServiceUnavailable,
  Unauthorized
} from "./Errors.ts"
import * as P from "./Params.ts"

export const RunStatus = Schema.Literals(["queued", "running", "completed"])
export const Conclusion = Schema.Literals(["success", "failure", "cancelled", "timed_out", "skipped"])
export const RunEvent = Schema.Literals(["push", "merge", "manual", "branch.created"])

export const CiStep = Schema.Struct({
  /** Unique within the run. */
  id: Schema.Number,
  name: Schema.String,
  command: Schema.String,
  status: RunStatus,
  conclusion: Schema.NullOr(Conclusion),
  exit_code: Schema.NullOr(Schema.Number),
  /** The step's output so far (secrets masked); absent with `?logs=false`. */
  logs: Schema.optionalKey(Schema.String),
  started_at: Schema.NullOr(Schema.String),
  finished_at: Schema.NullOr(Schema.String)
})
export type CiStep = typeof CiStep.Type

export const CiJob = Schema.Struct({
  /** Unique within the run. */
  id: Schema.Number,
  /** The job's key under `jobs:` in the workflow. */
  key: Schema.String,
  name: Schema.String,
  needs: Schema.Array(Schema.String),
  status: RunStatus,
  conclusion: Schema.NullOr(Conclusion),
  steps: Schema.Array(CiStep)
})
export type CiJob = typeof CiJob.Type

export const CiRun = Schema.Struct({
  id: Schema.Number,
  workflow_name: Schema.String,
  workflow_path: Schema.String,
  event: RunEvent,
  branch: Schema.String,
  commit_hash: Schema.String,
  triggered_by: Schema.String,
  status: RunStatus,
  conclusion: Schema.NullOr(Conclusion),
  /** Why the run failed before or outside its steps (an invalid workflow file, a lost runner). */
  error: Schema.NullOr(Schema.String),
  queued_at: Schema.String,
  started_at: Schema.NullOr(Schema.String),
  finished_at: Schema.NullOr(Schema.String),
  /** Present on a single run. */
  jobs: Schema.optionalKey(Schema.Array(CiJob)),
  /** True when `?logs=false` left the step logs out. */
  logs_omitted: Schema.optionalKey(Schema.Boolean)
})
export type CiRun = typeof CiRun.Type

// oxlint-disable-next-line no-control-regex -- refusing control characters is the point
const WORKFLOW = /^[^/\u0000-\u001f\u007f-\u009f]{1,255}$/
export const WorkflowName = P.make({
  check: (value) => WORKFLOW.test(value) ? { ok: true } : { ok: false, reason: "workflow must be a workflow file's stem: 1-255 characters, no '/', no control characters" },
  description: "A workflow's name: the stem of its file in .oak/workflows/.",
  pattern: WORKFLOW.source,
  minLength: 1,
  maxLength: 255,
  exact: false
})

export const StartRuns = Schema.Struct({
  /** One workflow; every workflow at the branch head when absent. */
  workflow: Schema.optionalKey(WorkflowName),
  /** Defaults to main. */
  branch: Schema.optionalKey(P.BranchName),
  /** Run at this commit of the branch's history instead of its head (the Oak client's rerun). */
  commit: Schema.optionalKey(P.Hash),
  /** The Oak client sends `manual`; nothing else is accepted. */
  event: Schema.optionalKey(Schema.Literal("manual"))
})

export const StartedRuns = Schema.Struct({ run_ids: Schema.Array(Schema.Number) })

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,128}$/
export const TriggerRequest = Schema.Struct({
  protocol: Schema.Literal("ordinary_trigger_v1"),
  expected_commit: P.Hash,
  idempotency_key: P.make({
    check: (value) => IDEMPOTENCY_KEY.test(value) ? { ok: true } : { ok: false, reason: "idempotency_key must be 1-128 printable ASCII characters without spaces" },
    description: "A client-chosen key: 1-128 printable ASCII characters without spaces.",
    pattern: IDEMPOTENCY_KEY.source,
    minLength: 1,
    maxLength: 128,
    exact: true
  }),
  branch: P.BranchName,
  /** One workflow; every workflow at the head when absent or null. */
  workflow: Schema.optionalKey(Schema.NullOr(WorkflowName))
})

export const TriggerReceipt = Schema.Struct({
  protocol: Schema.Literal("ordinary_trigger_v1"),
  branch: Schema.String,
  commit_hash: Schema.String,
  run_ids: Schema.Array(Schema.Number),
  replayed: Schema.Boolean
})
export type TriggerReceipt = typeof TriggerReceipt.Type

export const Capabilities = Schema.Struct({ ordinary_trigger_v1: Schema.Number })

const SECRET = /^[A-Za-z_][A-Za-z0-9_]{0,99}$/
export const SecretName = P.make({
  check: (value) =>
    SECRET.test(value)
      ? value.toUpperCase().startsWith("GROVE_")
        ? { ok: false, reason: "secret names starting with GROVE_ are reserved" }
        : { ok: true }
      : { ok: false, reason: "secret name must be a letter or '_' followed by letters, digits or '_' (at most 100)" },
  description: "A secret's name: an environment variable name (letters, digits, '_'; not starting with a digit or GROVE_).",
  pattern: "^(?![Gg][Rr][Oo][Vv][Ee]_)[A-Za-z_][A-Za-z0-9_]{0,99}$",
  minLength: 1,
  maxLength: 100,
  exact: true
})

/** At most 64 KiB, no NUL. */
export const MAX_SECRET_VALUE = 64 * 1024
export const SetSecret = Schema.Struct({
  name: SecretName,
  value: P.make({
    check: (value) =>
      value.length === 0
        ? { ok: false, reason: "value must not be empty" }
        : value.length > MAX_SECRET_VALUE
        ? { ok: false, reason: `value must be at most ${MAX_SECRET_VALUE} characters` }
        : value.includes("\u0000")
        ? { ok: false, reason: "value must not contain NUL" }
        : { ok: true },
    description: `The secret's value: 1-${MAX_SECRET_VALUE} characters, no NUL. Never returned.`,
    pattern: "^[^\\u0000]+$",
    minLength: 1,
    maxLength: MAX_SECRET_VALUE,
    exact: false
  })
})

export const Secret = Schema.Struct({ name: Schema.String, updated_at: Schema.String, updated_by: Schema.String })
export type Secret = typeof Secret.Type

const RUN_ID = /^[1-9][0-9]{0,17}$/
export const RunId = P.make({
  check: (value) => RUN_ID.test(value) ? { ok: true } : { ok: false, reason: "run id must be a positive integer" },
  description: "A CI run's id: a positive integer.",
  pattern: RUN_ID.source,
  minLength: 1,
  maxLength: 18,
  exact: true
})

const RUNS_LIMIT = /^(?:[1-9]|[1-9][0-9]|1[0-9][0-9]|200)$/
const Repo = P.OwnerRepo
const Run = { ...P.OwnerRepo, id: RunId }
const ReadErrors = [BadRequest, Unauthorized, Forbidden, NotFound, ServiceUnavailable] as const
const WriteErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PreconditionFailed, PayloadTooLarge, OperationPending, ServiceUnavailable] as const

export class CiGroup extends HttpApiGroup.make("ci").add(
  HttpApiEndpoint.get("capabilities", "/:owner/:name/ci/capabilities", { params: Repo, success: Capabilities, error: ReadErrors }),
  HttpApiEndpoint.get("runs", "/:owner/:name/ci/runs", {
    params: Repo,
    query: {
      limit: Schema.optionalKey(P.make({
        check: (value) => RUNS_LIMIT.test(value) ? { ok: true } : { ok: false, reason: "limit must be an integer from 1 to 200" },
        description: "Runs to list, newest first: 1-200 (default 50).",
        pattern: RUNS_LIMIT.source,
        minLength: 1,
        maxLength: 3,
        exact: true
      }))
    },
    success: Schema.Array(CiRun),
    error: ReadErrors
  }),
  HttpApiEndpoint.get("run", "/:owner/:name/ci/runs/:id", {
    params: Run,
    query: { logs: Schema.optionalKey(Schema.Literals(["true", "false", "0", "1"])) },
    success: CiRun,
    error: ReadErrors
  }),
  HttpApiEndpoint.post("start", "/:owner/:name/ci/runs", {
    params: Repo,
    payload: StartRuns,
    success: StartedRuns.pipe(HttpApiSchema.status(201)),
    error: WriteErrors
  }),
  HttpApiEndpoint.post("trigger", "/:owner/:name/ci/trigger", { params: Repo, payload: TriggerRequest, success: TriggerReceipt, error: WriteErrors }),
  HttpApiEndpoint.post("cancel", "/:owner/:name/ci/runs/:id/cancel", { params: Run, success: HttpApiSchema.NoContent, error: WriteErrors }),
  HttpApiEndpoint.get("secrets", "/:owner/:name/ci/secrets", { params: Repo, success: Schema.Struct({ secrets: Schema.Array(Secret) }), error: ReadErrors }),
  HttpApiEndpoint.put("setSecret", "/:owner/:name/ci/secrets", { params: Repo, payload: SetSecret, success: Secret, error: WriteErrors }),
  HttpApiEndpoint.delete("deleteSecret", "/:owner/:name/ci/secrets/:secret", {
    params: { ...Repo, secret: SecretName },
    success: HttpApiSchema.NoContent,
    error: WriteErrors
  })
) {}

