/**
 * The CI merge gate: a branch whose head commit has a CI run queued or
 * running, or whose latest run of some workflow did not succeed, may not be
 * merged without `force=1`. It reads the `ci_runs` records; CI itself fills them.
 */
import type { SqlClient } from "effect/sql"
import type { Fragment } from "effect/sql/Statement"

export type GateVerdict =
  | { readonly open: true }
  | { readonly open: false; readonly reason: "running" | "failing"; readonly workflows: ReadonlyArray<string> }

/** The latest run of one workflow on the commit. */
export interface GateRun {
  readonly workflow_name: string
  readonly status: string
  readonly conclusion: string | null
}

const NOT_PASSING = new Set(["failure", "cancelled", "timed_out"])

/**
 * The runs that decide the gate: the latest run of each workflow on exactly `commit` (an SQL expression, so a
 * planning statement can take it from the branch row it reads), as a JSON array (NULL when there are none).
 */
export const gateRunsJson = (sql: SqlClient.SqlClient, repoId: string, commit: Fragment) =>
  sql`(SELECT json_agg(g) FROM (SELECT DISTINCT ON (workflow_name) workflow_name, status, conclusion FROM ci_runs
    WHERE repo_id = ${repoId} AND commit_hash = ${commit}
    ORDER BY workflow_name, queued_at DESC, id DESC) g)`

/** The gate's verdict from those runs. */
export const gateVerdict = (runs: ReadonlyArray<GateRun>): GateVerdict => {
  const running = runs.filter((r) => r.status !== "completed").map((r) => r.workflow_name)
  if (running.length > 0) return { open: false, reason: "running", workflows: running }
  const failing = runs.filter((r) => r.conclusion !== null && NOT_PASSING.has(r.conclusion)).map((r) => r.workflow_name)
  if (failing.length > 0) return { open: false, reason: "failing", workflows: failing }
  return { open: true }
}
