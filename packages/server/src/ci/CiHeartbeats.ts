/**
 * CI runner liveness, judged by the runner's own heartbeat (issue 21): the node that runs a run keeps a row
 * in `ci_runner_heartbeats` and refreshes the rows of all its runs every `BEAT_EVERY` in one statement,
 * straight to the database, not through the run's entity partition (which may be unserved for minutes while
 * the runner is fine). The same statement answers each run's status, so a runner learns of a cancel without
 * a command. The sweeper (CiDispatcher) judges staleness by this row only, on the database's clock.
 */
import { Cause, Effect, Schedule } from "effect"
import type { Scope } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"

/** How often a node refreshes its runs' heartbeats. */
export const BEAT_EVERY = "2 seconds"

export interface CiHeartbeats {
  /** Beats for `runId` until the scope closes: its row is written now and removed at the end. */
  readonly track: (runId: number) => Effect.Effect<void, SqlError, Scope.Scope>
  /** Whether the run was still `running` at the last beat (false once it was cancelled, failed or deleted). */
  readonly running: (runId: number) => boolean
}

export const make = Effect.fnUntraced(function*(node: string) {
  const sql = yield* SqlClient.SqlClient
  /** The runs beating on this node, with their status at the last beat. */
  const runs = new Map<number, string>()

  const beat = Effect.suspend(() => {
    const ids = [...runs.keys()]
    if (ids.length === 0) return Effect.void
    return sql<{ id: string; status: string }>`UPDATE ci_runner_heartbeats h SET heartbeat_at = now() FROM ci_runs c
      WHERE h.run_id IN ${sql.in(ids)} AND h.node = ${node} AND c.id = h.run_id
      RETURNING h.run_id::int8::text AS id, c.status`.pipe(
      Effect.map((rows) => {
        const status = new Map(rows.map((row) => [Number(row.id), row.status]))
        // A row that is gone went with a completed (swept) or deleted run.
        for (const id of ids) if (runs.has(id)) runs.set(id, status.get(id) ?? "gone")
      })
    )
  })
  yield* beat.pipe(
    Effect.catchCause((cause) => Effect.logWarning("CI runner heartbeat failed; retrying", Cause.squash(cause))),
    Effect.repeat(Schedule.spaced(BEAT_EVERY)),
    Effect.forkScoped
  )

  const track = (runId: number) =>
    Effect.acquireRelease(
      sql`INSERT INTO ci_runner_heartbeats ${sql.insert({ run_id: runId, node })}
        ON CONFLICT (run_id) DO UPDATE SET node = excluded.node, heartbeat_at = now()`.pipe(
        Effect.andThen(Effect.sync(() => runs.set(runId, "running")))
      ),
      () =>
        Effect.sync(() => runs.delete(runId)).pipe(
          Effect.andThen(sql`DELETE FROM ci_runner_heartbeats WHERE run_id = ${runId} AND node = ${node}`),
          Effect.ignore
        )
    ).pipe(Effect.asVoid)

  const heartbeats: CiHeartbeats = { track, running: (runId) => runs.get(runId) === "running" }
  return heartbeats
})
