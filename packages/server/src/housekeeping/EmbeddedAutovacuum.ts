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
 * each, bounded by its 30,000-row sample), so a pass runs while the server is idle, table by table; after
 * MAX_SKIPPED busy looks in a row, a pass that only analyzes.
 *
 * Wired in Server.ts (embedded mode). It was unwired once: with statistics, a fresh organization's push after others'
 * ran 10x slower (its rows, inserted since the last ANALYZE, estimated at ~0, turned two chunk statements into nested
 * loops over `= ANY` arrays); those statements are now plan-proof (content/StaleStatistics.test.ts).
 */
import { Context, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { performance } from "node:perf_hooks"
// Idle: the event loop busy less than this share of the last period, the same rule as the idle collection.
import { IDLE_UTILIZATION } from "../ops/IdleGc.ts"

/** How often the tables' counters are looked at: a look is two statements, ~3-12 ms CPU at load 15. */
export const CHECK_EVERY = Duration.seconds(10)
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
  /** A pass that only analyzes (the due tables' VACUUMs wait for an idle pass): what a busy server runs. */
  readonly analyzePass: Effect.Effect<PassReport, SqlError>
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

    const pass = (vacuum: boolean) =>
      Effect.gen(function*() {
        const analyzed: Array<string> = []
        const vacuumed: Array<string> = []
        for (const t of yield* due) {
          // VACUUM cannot run in a transaction block; ANALYZE here would hold a caller's transaction open.
          if (vacuum && t.vacuum) {
            yield* sql.unsafe(`VACUUM (ANALYZE ${t.analyze ? "true" : "false"}) ${quoted(t.table)}`)
            vacuumed.push(t.table)
          } else if (t.analyze) yield* sql.unsafe(`ANALYZE ${quoted(t.table)}`)
          else continue
          if (t.analyze) analyzed.push(t.table)
          seen.add(t.table)
        }
        return { analyzed, vacuumed } as PassReport
      })
    return EmbeddedAutovacuum.of({ due, runPass: pass(true), analyzePass: pass(false) })
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
      const busy = utilization >= IDLE_UTILIZATION
      if (busy && skipped < MAX_SKIPPED) {
        skipped++
        return
      }
      skipped = 0
      // A busy server gets its statistics (ANALYZE reads a bounded sample); VACUUM reads the whole table: idle only.
      const report = yield* (busy ? autovacuum.analyzePass : autovacuum.runPass)
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
