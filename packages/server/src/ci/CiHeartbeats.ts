/**
 * CI runner liveness, judged by the runner's own heartbeat (issue 21): the node that runs a run keeps a row
 * in `ci_runner_heartbeats` and refreshes the rows of all its runs every `BEAT_EVERY` in one statement,
 * straight to the database, not through the run's entity partition (which may be unserved for minutes while
 * the runner is fine). The same statement answers each run's status, so a runner learns of a cancel without
 * a command. The sweeper (CiDispatcher) judges staleness by this row only (a run that has none yet, by its
 * start), on the database's clock.
 */
import { Cause, Effect, Schedule } from "effect"
import type { Scope } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"

/** How often a node refreshes its runs' heartbeats. */
export const BEAT_EVERY = "2 seconds"

export interface CiHeartbeats {
  /** Beats for `runId` until the scope closes: its row is written by the next beat and removed at the end. */
  readonly track: (runId: number) => Effect.Effect<void, SqlError, Scope.Scope>
  /** Whether the run was still `running` at the last beat (false once it was cancelled, failed or deleted). */
  readonly running: (runId: number) => boolean
}

export const make = Effect.fnUntraced(function*(node: string) {
  const sql = yield* SqlClient.SqlClient
  /** The runs beating on this node, with their status at the last beat. */
  const runs = new Map<number, string>()
  /** Those whose row a beat wrote (the rest have none yet). */
  const stored = new Set<number>()

  // A run's row is written by its first beat: until then the sweeper counts from the run's start (the Start
  // command's, just before), so a run shorter than a beat costs no heartbeat statement at all. Only for a run
  // running on this node: a node never takes over another's row. A run that ended while its row was being
  // written (its end found no row to remove) has it removed here.
  const store = (ids: ReadonlyArray<number>) =>
    ids.length === 0 ? Effect.void : sql`INSERT INTO ci_runner_heartbeats (run_id, node)
      SELECT id, ${node} FROM ci_runs WHERE id IN ${sql.in(ids)} AND status = 'running' AND runner_node = ${node}
      ON CONFLICT (run_id) DO UPDATE SET node = excluded.node, heartbeat_at = now()`.pipe(
      Effect.andThen(Effect.suspend(() => {
        for (const id of ids) if (runs.has(id)) stored.add(id)
        const ended = ids.filter((id) => !runs.has(id))
        return ended.length === 0 ? Effect.void : sql`DELETE FROM ci_runner_heartbeats WHERE run_id IN ${sql.in(ended)} AND node = ${node}`.pipe(Effect.asVoid)
      }))
    )

  const beat = Effect.suspend(() => {
    const ids = [...runs.keys()]
    if (ids.length === 0) return Effect.void
    const refresh = sql<{ id: string; status: string }>`UPDATE ci_runner_heartbeats h SET heartbeat_at = now() FROM ci_runs c
      WHERE h.run_id IN ${sql.in(ids)} AND h.node = ${node} AND c.id = h.run_id
      RETURNING h.run_id::int8::text AS id, c.status`
    return store(ids.filter((id) => !stored.has(id))).pipe(
      Effect.andThen(refresh),
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
      Effect.sync(() => runs.set(runId, "running")),
      () =>
        Effect.suspend(() => {
          runs.delete(runId)
          // A row a beat is writing now is removed by that beat.
          if (!stored.delete(runId)) return Effect.void
          return sql`DELETE FROM ci_runner_heartbeats WHERE run_id = ${runId} AND node = ${node}`.pipe(Effect.ignore)
        })
    ).pipe(Effect.asVoid)

  const heartbeats: CiHeartbeats = { track, running: (runId) => runs.get(runId) === "running" }
  return heartbeats
})
