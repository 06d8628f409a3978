import { expect, it } from "@effect/vitest"
import { DbEmbedded } from "@grove/storage"
import { Effect, Exit, Fiber, Layer, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { EmbeddedAutovacuum } from "./EmbeddedAutovacuum.ts"

const Db = DbEmbedded.layer({}).pipe(Layer.orDie)
const Live = EmbeddedAutovacuum.layer.pipe(Layer.provideMerge(Db))

/** The planner's row estimate for `v = value` (what stale statistics get wrong). */
const estimate = (value: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe<{ "QUERY PLAN": ReadonlyArray<{ Plan: { "Plan Rows": number } }> }>(
      `EXPLAIN (FORMAT JSON) SELECT * FROM probe WHERE v = ${value}`
    )
    return rows[0]!["QUERY PLAN"][0]!.Plan["Plan Rows"]
  })

const setup = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP TABLE IF EXISTS probe`
  yield* sql`CREATE TABLE probe (id int PRIMARY KEY, v int NOT NULL)`
  yield* sql`CREATE INDEX probe_v ON probe (v)`
  yield* sql`INSERT INTO probe SELECT g, 1 FROM generate_series(1, 5000) g`
})

const lastAnalyze = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ at: Date | null }>`SELECT last_analyze AS at FROM pg_stat_user_tables WHERE relname = 'probe'`
  return rows[0]?.at ?? null
})

it.layer(Live, { timeout: 60_000, excludeTestServices: true })("embedded autovacuum", (it) => {
  it.effect("analyzes a grown table (the plan's estimate changes), again once enough rows changed, then not", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const autovacuum = yield* EmbeddedAutovacuum
      yield* setup
      expect(yield* estimate(1)).toBeLessThan(500)
      expect((yield* autovacuum.due).map((t) => t.table)).toContain("probe")
      expect((yield* autovacuum.runPass).analyzed).toContain("probe")
      expect(yield* estimate(1)).toBeGreaterThan(4500)
      expect((yield* autovacuum.due).map((t) => t.table)).not.toContain("probe")

      // Changed rows past 50 + 10%: analyzed again; updated rows leave dead ones past 50 + 20%: vacuumed.
      yield* sql`UPDATE probe SET v = 2 WHERE id <= 3000`
      const due = (yield* autovacuum.due).find((t) => t.table === "probe")
      expect(due).toEqual({ table: "probe", analyze: true, vacuum: true })
      expect(yield* estimate(2)).toBeLessThan(500)
      const report = yield* autovacuum.runPass
      expect(report.vacuumed).toContain("probe")
      expect(report.analyzed).toContain("probe")
      expect(yield* estimate(2)).toBeGreaterThan(2500)
      const rest = yield* sql<{ dead: number }>`SELECT n_dead_tup::int AS dead FROM pg_stat_user_tables WHERE relname = 'probe'`
      expect(rest[0]!.dead).toBe(0)
      yield* sql`DROP TABLE IF EXISTS probe`
    }))

  it.effect("the busy server's pass only analyzes: the VACUUM waits for an idle pass", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const autovacuum = yield* EmbeddedAutovacuum
      yield* setup
      yield* autovacuum.runPass
      yield* sql`UPDATE probe SET v = 2 WHERE id <= 3000`
      const dead = Effect.map(
        sql<{ dead: number }>`SELECT n_dead_tup::int AS dead FROM pg_stat_user_tables WHERE relname = 'probe'`,
        (rows) => rows[0]!.dead
      )
      const report = yield* autovacuum.analyzePass
      expect(report).toEqual({ analyzed: ["probe"], vacuumed: [] })
      expect(yield* estimate(2)).toBeGreaterThan(2500)
      expect(yield* dead).toBeGreaterThan(2000)
      // Still due for VACUUM only: the next busy pass does nothing, the idle one vacuums.
      expect((yield* autovacuum.due).find((t) => t.table === "probe")).toEqual({ table: "probe", analyze: false, vacuum: true })
      expect(yield* autovacuum.analyzePass).toEqual({ analyzed: [], vacuumed: [] })
      expect((yield* autovacuum.runPass).vacuumed).toEqual(["probe"])
      expect(yield* dead).toBe(0)
      yield* sql`DROP TABLE IF EXISTS probe`
    }))

  it.effect("waits for another fiber's transaction instead of running inside it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const autovacuum = yield* EmbeddedAutovacuum
      yield* setup
      yield* sql`UPDATE probe SET v = 2`
      const order: Array<string> = []
      const open = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO probe VALUES (100000, 3)`
        order.push("transaction open")
        yield* Effect.sleep("300 millis")
        order.push("transaction ends")
      })).pipe(Effect.forkChild)
      yield* Effect.sleep("50 millis")
      // VACUUM fails in a transaction block: this pass succeeding after the commit shows it ran outside.
      const report = yield* autovacuum.runPass
      order.push("pass done")
      yield* Fiber.join(open)
      expect(report.vacuumed).toContain("probe")
      expect(order).toEqual(["transaction open", "transaction ends", "pass done"])
      yield* sql`DROP TABLE IF EXISTS probe`
    }))

  it.effect("the periodic pass stops with its scope", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const autovacuum = yield* EmbeddedAutovacuum
      yield* setup
      const scope = yield* Scope.make()
      yield* Layer.buildWithScope(EmbeddedAutovacuum.every("20 millis"), scope)
      for (let i = 0; i < 200 && (yield* lastAnalyze) === null; i++) yield* Effect.sleep("20 millis")
      expect(yield* lastAnalyze).not.toBeNull()
      yield* Scope.close(scope, Exit.void)
      const before = yield* lastAnalyze
      yield* sql`UPDATE probe SET v = 2`
      yield* Effect.sleep("300 millis")
      expect(yield* lastAnalyze).toEqual(before)
      expect((yield* autovacuum.due).map((t) => t.table)).toContain("probe")
      yield* sql`DROP TABLE IF EXISTS probe`
    }))
})
