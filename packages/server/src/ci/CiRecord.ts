/**
 * A CI run as stored, its jobs' state (kept in `ci_runs.jobs`, the API's job shape without the
 * logs) and the API forms. Shared by the read side, the CiRun entity and the runner.
 */
import type { ApiCi } from "@grove/api"
import type { Workflow } from "@grove/core/ci/Workflow"
import type { SqlClient } from "effect/sql"

export type RunStatus = "queued" | "running" | "completed"
export type Conclusion = "success" | "failure" | "cancelled" | "timed_out" | "skipped"
export type StepState = Omit<ApiCi.CiStep, "logs">
export interface JobState extends Omit<ApiCi.CiJob, "steps"> {
  readonly steps: ReadonlyArray<StepState>
}

export interface CiRunRecord {
  readonly id: number
  readonly repoId: string
  readonly workflowName: string
  readonly workflowPath: string
  readonly event: ApiCi.CiRun["event"]
  readonly branch: string
  readonly commitHash: string
  readonly triggeredBy: string
  readonly status: RunStatus
  readonly conclusion: Conclusion | null
  readonly error: string | null
  readonly jobs: ReadonlyArray<JobState>
  readonly runnerNode: string | null
  readonly heartbeatAt: Date | null
  readonly queuedAt: Date
  readonly startedAt: Date | null
  readonly finishedAt: Date | null
  readonly version: number
}

export const ciRunColumns = (sql: SqlClient.SqlClient) =>
  sql`id::int8::text AS id, repo_id AS "repoId", workflow_name AS "workflowName", workflow_path AS "workflowPath", event, branch,
    commit_hash AS "commitHash", triggered_by AS "triggeredBy", status, conclusion, error, jobs, runner_node AS "runnerNode",
    heartbeat_at AS "heartbeatAt", queued_at AS "queuedAt", started_at AS "startedAt", finished_at AS "finishedAt", version`

const date = (d: Date | string | null): Date | null => d === null ? null : d instanceof Date ? d : new Date(d)
const parse = <A>(value: unknown): A => (typeof value === "string" ? JSON.parse(value) : value) as A

/** A row as the drivers give it (bigint ids as text, jsonb as text or object, dates as text or Date). */
export const fromRow = (row: Record<string, unknown>): CiRunRecord => ({
  ...(row as unknown as CiRunRecord),
  id: Number(row.id),
  jobs: parse<ReadonlyArray<JobState>>(row.jobs) ?? [],
  heartbeatAt: date(row.heartbeatAt as Date | null),
  queuedAt: date(row.queuedAt as Date)!,
  startedAt: date(row.startedAt as Date | null),
  finishedAt: date(row.finishedAt as Date | null)
})

export const iso = (d: Date | null): string | null => d === null ? null : d.toISOString()

/** The API record; `logs` (per step id) when the caller asked for them. */
export const toApiRun = (run: CiRunRecord): ApiCi.CiRun => ({
  id: run.id,
  workflow_name: run.workflowName,
  workflow_path: run.workflowPath,
  event: run.event,
  branch: run.branch,
  commit_hash: run.commitHash,
  triggered_by: run.triggeredBy,
  status: run.status,
  conclusion: run.conclusion,
  error: run.error,
  queued_at: run.queuedAt.toISOString(),
  started_at: iso(run.startedAt),
  finished_at: iso(run.finishedAt)
})

export const withJobs = (run: CiRunRecord, logs: ReadonlyMap<number, string> | undefined): ApiCi.CiRun => ({
  ...toApiRun(run),
  jobs: run.jobs.map((job) => ({
    ...job,
    steps: job.steps.map((step) => logs === undefined ? step : { ...step, logs: logs.get(step.id) ?? "" })
  })),
  ...(logs === undefined ? { logs_omitted: true } : {})
})

/** The jobs of a run before it starts: every job and step queued, numbered through the run. */
export const jobsSkeleton = (workflow: Workflow): Array<JobState> => {
  let stepId = 0
  return workflow.jobs.map((job, index) => ({
    id: index + 1,
    key: job.id,
    name: job.name,
    needs: [...job.needs],
    status: "queued",
    conclusion: null,
    steps: job.steps.map((step) => ({
      id: ++stepId,
      name: step.name,
      command: step.run,
      status: "queued",
      conclusion: null,
      exit_code: null,
      started_at: null,
      finished_at: null
    }))
  }))
}

/** The CiRun entity's key: the run id, on its repository's partition. */
export const runKey = (repositoryKey: string, runId: number) => `${repositoryKey}#${runId}`
export const runIdOf = (entityId: string) => Number(entityId.slice(entityId.lastIndexOf("#") + 1))
