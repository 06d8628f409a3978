/**
 * The CI merge gate: a branch whose head commit has a CI run queued or
 * running, or whose latest run of some workflow did not succeed, may not be
 * merged without `force=1`. It reads the `ci_runs` records; CI itself fills them.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export type GateVerdict =
  | { readonly open: true }
  | { readonly open: false; readonly reason: "running" | "failing"; readonly workflows: ReadonlyArray<string> }

const NOT_PASSING = new Set(["failure", "cancelled", "timed_out"])

export const ciGate = Effect.fnUntraced(function*(repoId: string, commit: string) {
  const sql = yield* SqlClient.SqlClient
  // The latest run of each workflow on this exact commit decides for that workflow.
  const runs = yield* sql<{ workflow_name: string; status: string; conclusion: string | null }>`
    SELECT DISTINCT ON (workflow_name) workflow_name, status, conclusion FROM ci_runs
    WHERE repo_id = ${repoId} AND commit_hash = ${commit}
    ORDER BY workflow_name, queued_at DESC, id DESC`
  const running = runs.filter((r) => r.status !== "completed").map((r) => r.workflow_name)
  if (running.length > 0) return { open: false, reason: "running", workflows: running } satisfies GateVerdict
  const failing = runs.filter((r) => r.conclusion !== null && NOT_PASSING.has(r.conclusion)).map((r) => r.workflow_name)
  if (failing.length > 0) return { open: false, reason: "failing", workflows: failing } satisfies GateVerdict
  return { open: true } satisfies GateVerdict
})
