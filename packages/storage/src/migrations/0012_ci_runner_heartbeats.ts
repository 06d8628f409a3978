/**
 * CI runner liveness (issue 21): the node running a run keeps its heartbeat here, written straight to the
 * database (not through the run's entity partition, which may be unserved while the runner is fine); the
 * sweeper judges a run's runner by this row only. A row goes with its run.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE ci_runner_heartbeats (
    run_id bigint PRIMARY KEY REFERENCES ci_runs (id) ON DELETE CASCADE,
    node text NOT NULL,
    heartbeat_at timestamptz NOT NULL DEFAULT now()
  )`
})
