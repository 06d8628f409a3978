/**
 * CI runner liveness against a migrated in-memory database (PGlite): the sweeper's `stale` judges a running
 * run by its runner's own heartbeat row only. A run whose entity row was not touched for minutes (its
 * partition unserved) while its runner beats is not stale; one whose runner stopped beating is; a run no
 * runner ever beat for counts from its start. A beat tells the runner that its run was cancelled, and the
 * rows of completed runs are forgotten.
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { expect, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Schedule, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as CiHeartbeats from "./CiHeartbeats.ts"
import { CiRuns } from "./CiRuns.ts"
import { box, SecretBox } from "./CiSecrets.ts"

const Db = Migrations.layer.pipe(Layer.provideMerge(DbEmbedded.layer({})), Layer.orDie)
const Live = CiRuns.layer.pipe(Layer.provide(Layer.succeed(SecretBox, SecretBox.of(box(new Uint8Array(32))))), Layer.provideMerge(Db))

/** A running run started `startedAgo` ago whose entity row (ci_runs.heartbeat_at) was last touched then too. */
const runningRun = (repoId: string, startedAgo: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ id: string }>`INSERT INTO ci_runs (repo_id, workflow_name, workflow_path, event, branch, commit_hash,
        triggered_by, status, runner_node, started_at, heartbeat_at)
      VALUES (${repoId}, 'w', '.oak/workflows/w.yml', 'manual', 'main', 'c0ffee', 'ada', 'running', 'node-a',
        now() - ${startedAgo}::interval, now() - ${startedAgo}::interval)
      RETURNING id::int8::text AS id`
    return Number(rows[0]!.id)
  })

layer(Live, { timeout: 60_000, excludeTestServices: true })("CI runner heartbeats", (it) => {
    it.effect("the sweeper judges a runner by its own heartbeat row, and the beat reports a cancel", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const runs = yield* CiRuns
        const orgId = randomUUID()
        const repoId = randomUUID()
        yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "acme", name: "acme" })}`
        yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "app" })}`
        const beating = yield* runningRun(repoId, "10 minutes")
        const silent = yield* runningRun(repoId, "10 minutes")
        const neverBeat = yield* runningRun(repoId, "10 minutes")
        const justStarted = yield* runningRun(repoId, "1 second")

        const scope = yield* Scope.make()
        const beats = yield* CiHeartbeats.make("node-a").pipe(Scope.provide(scope))
        yield* beats.track(beating).pipe(Scope.provide(scope))
        // Its row is written by the node's next beat (every 2 s).
        yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM ci_runner_heartbeats WHERE run_id = ${beating}`.pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), while: (rows) => rows[0]?.n === "0" }),
          Effect.timeout("20 seconds")
        )
        // The silent run's runner was on node-b, which stopped beating a minute ago (killed).
        yield* sql`INSERT INTO ci_runner_heartbeats (run_id, node, heartbeat_at) VALUES (${silent}, 'node-b', now() - interval '1 minute')`

        const stale = yield* runs.stale(15_000)
        // Only the run whose runner's row is stale, and the one no runner ever beat for since its start.
        expect(stale.map((run) => run.id).sort((a, b) => a - b)).toEqual([silent, neverBeat].sort((a, b) => a - b))
        expect(stale.find((run) => run.id === silent)?.node).toBe("node-a")
        // The beating run's entity row says 10 minutes (its Progress commands held up): not stale.
        expect(stale.map((run) => run.id)).not.toContain(beating)
        expect(beats.running(beating)).toBe(true)

        // A cancel lands (through the entity, elsewhere): the next beat tells the runner.
        yield* sql`UPDATE ci_runs SET status = 'completed', conclusion = 'cancelled' WHERE id = ${beating}`
        yield* Effect.sync(() => beats.running(beating)).pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), while: (running) => running }),
          Effect.timeout("20 seconds")
        )
        expect(beats.running(beating)).toBe(false)
        yield* runs.forgetBeats
        const left = yield* sql<{ id: string }>`SELECT run_id::int8::text AS id FROM ci_runner_heartbeats ORDER BY run_id`
        expect(left.map((row) => Number(row.id))).toEqual([silent])

        // The runs' scope on node-a ends: their rows go, node-b's stays until its run is failed and swept.
        yield* beats.track(justStarted).pipe(Scope.provide(scope))
        yield* Scope.close(scope, Exit.void)
        const after = yield* sql<{ id: string }>`SELECT run_id::int8::text AS id FROM ci_runner_heartbeats`
        expect(after.map((row) => Number(row.id))).toEqual([silent])
      }))

    it.effect("a node never takes over the heartbeat row of a run running on another node", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const orgId = randomUUID()
        const repoId = randomUUID()
        yield* sql`INSERT INTO organizations ${sql.insert({ id: orgId, slug: "other", name: "other" })}`
        yield* sql`INSERT INTO repositories ${sql.insert({ id: repoId, org_id: orgId, name: "app" })}`
        // Running on node-a, whose runner beats.
        const run = yield* runningRun(repoId, "1 second")
        yield* sql`INSERT INTO ci_runner_heartbeats (run_id, node) VALUES (${run}, 'node-a')`
        // node-b is told to run it too (a replayed start): its beat finds no row of its own, so it stops.
        const scope = yield* Scope.make()
        const beats = yield* CiHeartbeats.make("node-b").pipe(Scope.provide(scope))
        yield* beats.track(run).pipe(Scope.provide(scope))
        yield* Effect.sync(() => beats.running(run)).pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), while: (running) => running }),
          Effect.timeout("20 seconds")
        )
        yield* Scope.close(scope, Exit.void)
        const rows = yield* sql<{ node: string }>`SELECT node FROM ci_runner_heartbeats WHERE run_id = ${run}`
        expect(rows.map((row) => row.node)).toEqual(["node-a"])
      }))
})
