/**
 * What PostgreSQL's autovacuum does, for the embedded database: PGlite has no autovacuum worker, so no
 * table is ever analyzed and the planner keeps its empty-table guesses (blob_chunks "40 rows" after a
 * 5k-file push: it scanned the organization's whole blob_chunks and repo_blobs for each batch of 2,000
 * readable chunks, 37-55 -> 17-27 ms CPU once analyzed), and dead rows (the `referenced` updates, the
 * inbox) are never reclaimed. Cluster PostgreSQL runs its own autovacuum; this is wired in embedded mode only.
 *
 * A table is analyzed when autovacuum would (rows changed since its last ANALYZE over 50 + 10% of its rows)
 * and once per process if it never was: PGlite keeps no statistics counters across a restart, so a table
 * grown before one shows no changes. It is vacuumed when its dead rows pass 50 + 20% of its rows.
 * Each statement holds the one connection for a short while (a 5k-file push's tables: ANALYZE 5-105 ms CPU
 * each, bounded by its 30,000-row sample), so a pass runs only while the server is idle, table by table.
 *
 * NOT WIRED (Server.ts): with statistics, a fresh organization's push after others' ran 10x slower (server CPU
 * 2.9 -> 29 s for 5k files): its rows, inserted since the last ANALYZE, are estimated at ~0, and two statements turn
 * into nested loops over `= ANY` arrays (the upload check's blob_chunks JOIN repo_blobs, 35 s over 7 calls; the
 * publish's `UPDATE chunks SET referenced`, 4.7 s). Those must be made plan-proof first (cluster PostgreSQL's own
 * autovacuum can put them in the same state).
 */
import { Context, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { performance } from "node:perf_hooks"

/** How often the tables' counters are looked at: a look is two statements, ~3-12 ms CPU at load 15. */
export const CHECK_EVERY = Duration.seconds(10)
/** Idle: the event loop busy less than this share of the last period (as ops/IdleGc.ts). */
export const IDLE_UTILIZATION = 0.5
/** Busy looks in a row after which a pass runs anyway: a steadily busy server still gets its statistics. */
export const MAX_SKIPPED = 6

export interface TableDue {
  readonly table: string
  readonly analyze: boolean
  readonly vacuum: boolean
}

export interface PassReport {
  readonly analyzed: ReadonlyArray<string>
  readonly vacuumed: ReadonlyArray<string>
}

export class EmbeddedAutovacuum extends Context.Service<EmbeddedAutovacuum, {
  /** The tables due for ANALYZE or VACUUM now. */
  readonly due: Effect.Effect<ReadonlyArray<TableDue>, SqlError>
  /** One pass: each due table analyzed or vacuumed, one statement at a time, outside any transaction. */
  readonly runPass: Effect.Effect<PassReport, SqlError>
}>()("grove/server/housekeeping/EmbeddedAutovacuum") {
  static readonly layer = Layer.effect(EmbeddedAutovacuum, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Tables analyzed by this process: a never-analyzed one (reltuples < 0) is analyzed once, not on every look.
    const seen = new Set<string>()

    const due = Effect.gen(function*() {
      // This one backend's counters reach the statistics views at most once a second, at the end of a
      // statement: flushed now, so the query below sees the latest writes.
      yield* sql`SELECT pg_stat_force_next_flush()`
      // pg_class and the counters' functions, not pg_stat_user_tables: the view costs ~2x the CPU per look.
      const rows = yield* sql<{ table: string; analyze: boolean; vacuum: boolean; never: boolean }>`
        SELECT relname AS table,
          pg_stat_get_mod_since_analyze(oid) > 50 + 0.1 * greatest(reltuples, 0) AS analyze,
          pg_stat_get_dead_tuples(oid) > 50 + 0.2 * greatest(reltuples, 0) AS vacuum,
          CASE WHEN reltuples < 0 THEN pg_relation_size(oid) > 0 ELSE false END AS never
        FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'`
      return rows
        .map((r) => ({ table: r.table, analyze: r.analyze || (r.never && !seen.has(r.table)), vacuum: r.vacuum }))
        .filter((r) => r.analyze || r.vacuum) as ReadonlyArray<TableDue>
    })

    const quoted = (table: string) => `"${table.replaceAll("\"", "\"\"")}"`

    const runPass = Effect.gen(function*() {
      const analyzed: Array<string> = []
      const vacuumed: Array<string> = []
      for (const t of yield* due) {
        // VACUUM cannot run in a transaction block; ANALYZE here would hold a caller's transaction open.
        if (t.vacuum) {
          yield* sql.unsafe(`VACUUM (ANALYZE ${t.analyze ? "true" : "false"}) ${quoted(t.table)}`)
          vacuumed.push(t.table)
        } else yield* sql.unsafe(`ANALYZE ${quoted(t.table)}`)
        if (t.analyze) analyzed.push(t.table)
        seen.add(t.table)
      }
      return { analyzed, vacuumed } as PassReport
    })
    return EmbeddedAutovacuum.of({ due, runPass })
  }))

  /** The periodic pass, when the server is idle; stops with the layer's scope (the server's). */
  static readonly every = (interval: Duration.Input) => Layer.effectDiscard(Effect.gen(function*() {
    const autovacuum = yield* EmbeddedAutovacuum
    let last = performance.eventLoopUtilization()
    let skipped = 0
    const look = Effect.gen(function*() {
      const now = performance.eventLoopUtilization()
      const { utilization } = performance.eventLoopUtilization(now, last)
      last = now
      if (utilization >= IDLE_UTILIZATION && skipped < MAX_SKIPPED) {
        skipped++
        return
      }
      skipped = 0
      const report = yield* autovacuum.runPass
      if (report.analyzed.length + report.vacuumed.length > 0) {
        yield* Effect.logDebug("embedded autovacuum", report)
      }
    })
    yield* look.pipe(
      Effect.catchCause((cause) => Effect.logWarning("embedded autovacuum failed", cause)),
      Effect.delay(interval),
      Effect.forever,
      Effect.forkScoped
    )
  })).pipe(Layer.provide(EmbeddedAutovacuum.layer))

  static readonly live = EmbeddedAutovacuum.every(CHECK_EVERY)
}
