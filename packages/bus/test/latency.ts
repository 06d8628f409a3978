/**
 * What one minimal command costs from send to reply, in embedded mode (MemoryBus + in-memory PGlite):
 * CPU and wall per command, commands sent one at a time (nothing to batch with), against the same
 * transaction run directly (BEGIN, the fence with the inbox row, the handler's insert, the reply, COMMIT).
 * The difference is the runtime's own cost: the hops from the sender to the partition's worker and back.
 *
 *   node packages/bus/test/latency.ts [commands] [rounds] [runtime|direct]
 *
 * Rounds alternate the two ways, so a loaded machine's swings hit both alike; naming one way measures only it
 * (for an A/B of two versions of the runtime, run in turns).
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { Effect, Layer, Option, References } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { EntityRuntime } from "../src/EntityRuntime.ts"
import * as Inbox from "../src/Inbox.ts"
import * as MemoryBus from "../src/MemoryBus.ts"
import * as PartitionFence from "../src/PartitionFence.ts"
import { createTables, TestEntity, TestHandlers } from "./support/TestEntity.ts"

const [total = "1000", roundsArg = "6", only] = process.argv.slice(2)
const commands = Number(total)
const rounds = Number(roundsArg)

interface Sample {
  readonly cpuUs: number
  readonly wallUs: number
  readonly p50Us: number
}

/** Runs `once` `commands` times in a row; CPU and wall per run. */
const measure = (once: (i: number) => Effect.Effect<unknown, unknown, never>) =>
  Effect.gen(function*() {
    const walls: Array<number> = []
    const cpu = process.cpuUsage()
    const started = performance.now()
    for (let i = 0; i < commands; i++) {
      const t = performance.now()
      yield* once(i)
      walls.push(performance.now() - t)
    }
    const wall = performance.now() - started
    const used = process.cpuUsage(cpu)
    walls.sort((a, b) => a - b)
    return {
      cpuUs: (used.user + used.system) / commands,
      wallUs: (wall * 1000) / commands,
      p50Us: walls[Math.floor(walls.length / 2)]! * 1000
    } satisfies Sample
  })

const program = Effect.gen(function*() {
  const runtime = yield* EntityRuntime
  const sql = yield* SqlClient.SqlClient
  const run = randomUUID().slice(0, 8)
  const key = `latency-${run}`
  const partition = 0
  const epoch = yield* PartitionFence.claim("latency.direct", partition, "direct")
  let offset = 0n

  const viaRuntime = (i: number) => runtime.send(TestEntity, key, "Apply", { seq: i }).pipe(Effect.orDie)
  // The owner's transaction alone, as CommandProcessor.transact runs it for Apply.
  const direct = (i: number) =>
    sql.withTransaction(Effect.gen(function*() {
      const commandId = randomUUID()
      const entry = { commandId, entityType: TestEntity.name, entityId: key, command: "Apply", partition }
      const previous = yield* Inbox.begin(entry, { topic: "latency.direct", partition, epoch, offset: offset++ })
      if (Option.isSome(previous)) return
      yield* sql`INSERT INTO bus_test_applied (command_id, entity_id, seq, partition, epoch, node_id)
        VALUES (${commandId}, ${key}, ${i}, ${partition}, ${epoch}, 'direct')`
      yield* Inbox.complete(commandId, { _tag: "Success", value: { seq: i, node: "direct", partition, epoch } })
    })).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)

  // Warm up both ways (statements prepared, every partition claimed, the JIT settled).
  yield* Effect.forEach(Array.from({ length: 300 }, (_, i) => i), (i) => Effect.andThen(viaRuntime(i), direct(i)), { discard: true })

  const results: { runtime: Array<Sample>; direct: Array<Sample> } = { runtime: [], direct: [] }
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? (["runtime", "direct"] as const) : (["direct", "runtime"] as const)
    for (const way of order) if (only === undefined || only === way) results[way].push(yield* measure(way === "runtime" ? viaRuntime : direct))
  }
  const fmt = (s: Sample) => `cpu ${s.cpuUs.toFixed(0)} µs, wall ${s.wallUs.toFixed(0)} µs (p50 ${s.p50Us.toFixed(0)})`
  if (only !== undefined) {
    const samples = results[only as "runtime" | "direct"]
    console.log(`${only}: cpu ${samples.map((s) => s.cpuUs.toFixed(0)).join("/")} µs, p50 wall ${samples.map((s) => s.p50Us.toFixed(0)).join("/")} µs`)
    return
  }
  for (let round = 0; round < rounds; round++) {
    const r = results.runtime[round]!
    const d = results.direct[round]!
    console.log(`round ${round + 1}: runtime ${fmt(r)} | direct ${fmt(d)} | runtime - direct: cpu ${(r.cpuUs - d.cpuUs).toFixed(0)} µs`)
  }
  const median = (values: Array<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  console.log(
    `median over ${rounds} rounds of ${commands} commands: runtime cpu ${median(results.runtime.map((s) => s.cpuUs)).toFixed(0)} µs, ` +
      `direct cpu ${median(results.direct.map((s) => s.cpuUs)).toFixed(0)} µs; runtime p50 wall ${median(results.runtime.map((s) => s.p50Us)).toFixed(0)} µs, ` +
      `direct p50 wall ${median(results.direct.map((s) => s.p50Us)).toFixed(0)} µs`
  )
})

program.pipe(
  Effect.provide(
    TestHandlers.pipe(
      // No relay poll in the measured window (Apply emits nothing).
      Layer.provideMerge(EntityRuntime.layer({ relay: { pollInterval: "1 hour" } })),
      Layer.provide(MemoryBus.layerEmbedded()),
      Layer.provideMerge(Layer.effectDiscard(Effect.andThen(Migrations.run, createTables))),
      Layer.provideMerge(DbEmbedded.layer({}))
    )
  ),
  Effect.scoped,
  // As the server runs without a trace exporter.
  Effect.provideService(References.TracerEnabled, false),
  Effect.runPromise
).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
