/**
 * Commands per second through the entity runtime, and failover time on Kafka.
 *
 *   npx node packages/bus/test/bench.ts memory [commands] [in-flight]
 *   npx node packages/bus/test/bench.ts kafka [commands] [in-flight]
 *
 * memory: the embedded setup, one node (MemoryBus + in-memory PGlite).
 * kafka: a private broker and PostgreSQL, two hosting nodes (one here, one
 * in a child process) and a client here; then the child is SIGKILLed and the
 * time until its partitions answer again is measured.
 * Each command is `Apply` on `TestEntity`: one transaction with the fence,
 * the inbox, one insert and the stored reply. Keys are spread over 256
 * entities.
 */
import { DbEmbedded, DbPostgres, Migrations } from "@grove/storage"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as path from "node:path"
import { startKafka } from "../../../scripts/infra/kafka.ts"
import { startPostgres } from "../../../scripts/infra/postgres.ts"
import { spawnServer } from "../../../scripts/infra/process.ts"
import { EntityRuntime } from "../src/EntityRuntime.ts"
import * as KafkaBus from "../src/KafkaBus.ts"
import * as MemoryBus from "../src/MemoryBus.ts"
import { partitionFor } from "../src/murmur2.ts"
import * as Topics from "../src/Topics.ts"
import { createTables, TestEntity, TestHandlers } from "./support/TestEntity.ts"

const [mode = "memory", total = "5000", inFlight = "64"] = process.argv.slice(2)
const commands = Number(total)
const window = Number(inFlight)

/** Sends `commands` commands with at most `window` waiting for their reply; returns commands/s. */
const drive = (label: string) =>
  Effect.gen(function*() {
    const runtime = yield* EntityRuntime
    const run = randomUUID().slice(0, 8)
    // warm up: every partition claimed, handlers registered
    yield* Effect.forEach(Array.from({ length: 64 }, (_, i) => i), (i) =>
      runtime.send(TestEntity, `warm-${run}-${i}`, "Apply", { seq: i }, { timeout: "60 seconds" }), {
      concurrency: 16
    })
    const started = performance.now()
    yield* Effect.forEach(Array.from({ length: commands }, (_, i) => i), (i) =>
      runtime.send(TestEntity, `bench-${run}-${i % 256}`, "Apply", { seq: i }, { timeout: "60 seconds" }), {
      concurrency: window,
      discard: true
    })
    const seconds = (performance.now() - started) / 1000
    const rate = commands / seconds
    yield* Effect.log(`${label}: ${commands} commands in ${seconds.toFixed(2)} s = ${rate.toFixed(0)} commands/s (${window} in flight)`)
    return rate
  })

const memory = drive("MemoryBus + PGlite").pipe(
  Effect.provide(
    TestHandlers.pipe(
      Layer.provideMerge(EntityRuntime.layer()),
      Layer.provide(MemoryBus.layerEmbedded()),
      Layer.provideMerge(Layer.effectDiscard(Effect.andThen(Migrations.run, createTables))),
      Layer.provide(DbEmbedded.layer({}))
    )
  )
)

const kafka = Effect.gen(function*() {
  const broker = yield* startKafka()
  const pg = yield* startPostgres()
  const prefix = `bench-${randomUUID().slice(0, 8)}.`
  const sessionTimeout = 3000
  const sql = DbPostgres.layer({ url: pg.url, maxConnections: 20 })
  const db = yield* Layer.build(Layer.effectDiscard(Effect.andThen(Migrations.run, createTables)).pipe(Layer.provideMerge(sql)))
  const busOf = (nodeId: string) => KafkaBus.layer({ nodeId, bootstrap: broker.bootstrap, prefix, sessionTimeout })
  // node a here, node b in its own process so that it can be killed for real
  yield* Layer.build(
    TestHandlers.pipe(Layer.provideMerge(EntityRuntime.layer()), Layer.provide(busOf("bench-a")), Layer.provide(sql))
  )
  const victim = yield* spawnServer({
    name: "bench-b",
    command: process.execPath,
    args: [path.join(import.meta.dirname, "support", "kafka-node.ts")],
    env: {
      ...process.env,
      GROVE_NODE_ID: "bench-b",
      GROVE_KAFKA_BOOTSTRAP: broker.bootstrap,
      GROVE_KAFKA_PREFIX: prefix,
      GROVE_SESSION_TIMEOUT_MS: String(sessionTimeout),
      GROVE_DATABASE_URL: pg.url
    }
  })
  yield* victim.waitForLine((line) => line === "ready", 90_000)
  const client = yield* Layer.build(
    EntityRuntime.layer({ host: false }).pipe(Layer.provide(busOf("bench-client")), Layer.provide(sql))
  )
  const runtime = Context.get(client, EntityRuntime)
  yield* drive("KafkaBus + PostgreSQL, 2 nodes").pipe(Effect.provideService(EntityRuntime, runtime))

  // Failover: SIGKILL node b, then time until every partition it owned answers again.
  const owned = yield* Effect.provideContext(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ readonly partition: number }>`SELECT partition FROM partition_epochs
        WHERE topic = ${Topics.commands} AND owner = 'bench-b'`),
    db
  )
  const run = randomUUID().slice(0, 8)
  const idOn = (partition: number) => {
    for (let i = 0;; i++) {
      if (partitionFor(`after-${run}-${i}`, 32) === partition) return `after-${run}-${i}`
    }
  }
  const killedAt = performance.now()
  process.kill(victim.pid, "SIGKILL")
  yield* Effect.forEach(owned, (row) =>
    runtime.send(TestEntity, idOn(row.partition), "Apply", { seq: row.partition }, { timeout: "60 seconds" }), {
    concurrency: "unbounded"
  })
  yield* Effect.log(
    `failover: the ${owned.length} partitions of the killed node answered ${
      (performance.now() - killedAt).toFixed(0)
    } ms after SIGKILL (session timeout ${sessionTimeout} ms)`
  )
}).pipe(Effect.scoped)

Effect.runFork(mode === "kafka" ? kafka : memory.pipe(Effect.asVoid))
