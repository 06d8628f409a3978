/**
 * Issue 24: a manual CI start on a node with a free runner is one QueueCiRuns command, and on the embedded
 * database each SQL statement is a good part of its latency (bench:ci's trigger -> running). This pins the
 * statements from the send to the reply, sent the way CiHandlers sends it (CiStartQueue: a runner of this node
 * reserved, a command id made for the send so that the outcome can be followed, yet sent fresh, so no inbox row
 * is written ahead), on a counted connection to a migrated in-memory PGlite. A statement added back fails it,
 * and so does the request no longer being sent fresh.
 */
import { EntityRuntime } from "@grove/bus"
import { expect, layer } from "@effect/vitest"
import { Migrations } from "@grove/storage"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { parseConfig, ServerConfig } from "../Config.ts"
import { quietRuntime, repositoryRows } from "../entities/Commands.testing.ts"
import { branchSlice } from "../entities/EntitySlices.ts"
import { branchRow, countedDatabase } from "../merges/MergeFixtures.testing.ts"
import { CiGateway } from "./CiGateway.ts"
import * as CiQueue from "./CiQueueCommand.ts"
import { makeStartQueue } from "./CiStartQueue.ts"
import { CiWake } from "./CiWake.ts"

const { traffic, layer: Counted } = countedDatabase()
const Db = Migrations.layer.pipe(Layer.provideMerge(Counted), Layer.orDie)
const Branch = branchSlice(CiQueue.commands)
const Runtime = quietRuntime("statements")
const Node = EntityRuntime.EntityRuntime.register(Branch, CiQueue.handlers).pipe(Layer.provideMerge(Runtime), Layer.provideMerge(Db))
const Config = Layer.succeed(ServerConfig, parseConfig([], {}))
const Handlers = Layer.mergeAll(CiGateway.layer, CiWake.layer).pipe(Layer.provideMerge(Node), Layer.provideMerge(Config))

/**
 * The command's transaction: BEGIN, the fence with the inbox row, the repository and the branch (locked, one
 * read), the run's row, the reply with the event rows it committed, COMMIT. 8 before: the sender wrote the inbox
 * row before sending, and the repository and the branch were read apart.
 */
const EXPECTED = 6

layer(Handlers, { timeout: 60_000, excludeTestServices: true })("a manual CI start's SQL statements", (it) => {
  it.effect("queuing one run started on a reserved runner runs a fixed number of statements", () =>
    Effect.gen(function*() {
      const runtime = yield* EntityRuntime.EntityRuntime
      const sql = yield* SqlClient.SqlClient
      const { key, repoId } = yield* repositoryRows("pin")
      yield* branchRow(repoId, "main", "c".repeat(64))
      // This node's runners, as its dispatcher offers them: always one free; what each request handed them.
      const handed: Array<number> = []
      const wake = yield* CiWake
      wake.attach({
        node: "statements",
        reserve: () => true,
        release: Effect.die(new Error("a reservation was given back")),
        run: (runId) => Effect.sync(() => handed.push(runId)),
        follow: () => Effect.die(new Error("the answer did not come"))
      })
      const queue = yield* makeStartQueue(30_000)
      // As a start request without an Idempotency-Key sends it.
      const start = Effect.gen(function*() {
        const queued = yield* queue(key, "main", {
          event: "manual",
          commit: "c".repeat(64),
          requireHead: false,
          trigger: null,
          queueLimit: 100,
          triggeredBy: "t",
          runs: [{ workflowName: "noop", workflowPath: ".oak/workflows/noop.yml", workflow: "{}", jobs: "[]", error: null }]
        }, "fail", { owner: "user:t" })
        expect(handed.at(-1), "started on the reserved runner").toBe(queued!.run_ids[0])
        return queued!.run_ids[0]!
      })
      // The first start prepares the statements; every partition's worker claims its partition meanwhile.
      yield* start
      for (let waited = 0; runtime.health().claimed.length < 32; waited += 10) {
        if (waited > 30_000) return yield* Effect.die(new Error("the partitions were never all claimed"))
        yield* Effect.sleep(10)
      }
      yield* start
      const before = traffic.statements.length
      const id = yield* start
      const statements = traffic.statements.slice(before)
      expect(statements.filter((s) => s.startsWith("INSERT INTO command_inbox")), "no inbox row written ahead of the command").toEqual([])
      expect(statements.length, statements.map((s, i) => `${i + 1}. ${s.slice(0, 120)}`).join("\n")).toBe(EXPECTED)
      // Recorded as started by the reserving node.
      const [row] = yield* sql<{ status: string; runner_node: string }>`SELECT status, runner_node FROM ci_runs WHERE id = ${id}`
      expect(row).toEqual({ status: "running", runner_node: "statements" })
    }))
})
