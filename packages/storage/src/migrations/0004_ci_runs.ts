/**
 * CI run records (the shape the Oak client reads: workflow, event, branch,
 * commit, status, conclusion, times, jobs). CI execution comes later; the merge
 * gate reads these rows already.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE ci_runs (
    id uuid PRIMARY KEY,
    repo_id uuid NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    workflow_name text NOT NULL,
    workflow_path text NOT NULL,
    event text NOT NULL CHECK (event IN ('push', 'merge', 'manual')),
    branch text NOT NULL,
    commit_hash text NOT NULL,
    triggered_by text NOT NULL,
    status text NOT NULL CHECK (status IN ('queued', 'running', 'completed')),
    conclusion text CHECK (conclusion IN ('success', 'failure', 'cancelled', 'timed_out', 'skipped')),
    error text,
    jobs jsonb NOT NULL DEFAULT '[]'::jsonb,
    queued_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz,
    version integer NOT NULL DEFAULT 1
  )`
  yield* sql`CREATE INDEX ci_runs_commit ON ci_runs (repo_id, commit_hash)`
})
