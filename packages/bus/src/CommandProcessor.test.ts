/**
 * The claim protocol of a command partition's worker, against a real (in-memory PGlite) database:
 * the interleaving of issue 21's run 3 (a worker of a past generation claims a newer epoch after the
 * partition's new owner did), and a worker that is fenced once the partition was assigned away.
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Logger, Option, Queue, Semaphore, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { TestEntity, createTables, handlers } from "../test/support/TestEntity.ts"
import { Bus, type BusRecord, type PartitionClaim } from "./Bus.ts"
import * as CommandProcessor from "./CommandProcessor.ts"
import * as Inbox from "./Inbox.ts"
import * as MemoryBus from "./MemoryBus.ts"
import * as OutboxRelay from "./OutboxRelay.ts"
import * as PartitionFence from "./PartitionFence.ts"
import * as PartitionHealth from "./PartitionHealth.ts"
import * as Topics from "./Topics.ts"

const PARTITION = 5

const Services = MemoryBus.layerEmbedded({ nodeId: "node-2" }).pipe(
  Layer.provideMerge(Layer.effectDiscard(Effect.andThen(Migrations.run, createTables))),
  Layer.provideMerge(DbEmbedded.layer({}))
)

/** The lines logged under `CaptureLogs`, with their annotations. */
const logged: Array<{ readonly message: unknown; readonly annotations: Record<string, unknown> }> = []
const CaptureLogs = Logger.layer([Logger.make((options) => {
  logged.push({ message: options.message, annotations: Logger.formatStructured.log(options).annotations })
})])

const registered = { entity: TestEntity, handlers } as unknown as CommandProcessor.Registered

const command = (offset: bigint, commandId: string, seq: number): BusRecord => ({
  topic: Topics.commands,
  partition: PARTITION,
  offset,
  key: "k",
  value: { type: "grove.command", v: 1, commandId, entityType: TestEntity.name, entityId: "k", command: "Apply", payload: { seq } },
  headers: {}
})

const waitFor = <A>(what: string, check: Effect.Effect<Option.Option<A>, unknown, SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 400; i++) {
      const found = yield* Effect.orDie(check)
      if (Option.isSome(found)) return found.value
      yield* Effect.sleep(25)
    }
    return yield* Effect.die(new Error(`timed out waiting: ${what}`))
  })

const replyOf = (commandId: string) =>
  Effect.map(Inbox.read(commandId), (operation) => Option.flatMap(operation, (op) => Option.fromNullishOr(op.reply)))

const appliedCount = (commandId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM bus_test_applied WHERE command_id = ${commandId}`
    return rows[0]!.n
  })

/** A worker of `node-2` for partition 5 in generation 8, fed by hand, owning it while `owned.current`. */
const startWorker = Effect.gen(function*() {
  const bus = yield* Bus
  const records = yield* Queue.unbounded<BusRecord>()
  const owned = { current: true }
  const claim: PartitionClaim = {
    topic: Topics.commands,
    partition: PARTITION,
    generation: 8,
    records: Stream.fromQueue(records),
    commit: () => Effect.void,
    owned: Effect.sync(() => owned.current)
  }
  const health = PartitionHealth.make()
  const made = yield* OutboxRelay.make()
  /** What the worker told the relay, in order: a wake makes the relay read the whole table. */
  const told: Array<string> = []
  const relay: OutboxRelay.OutboxRelay = {
    ...made,
    wake: () => {
      told.push("wake")
      made.wake()
    },
    committed: (partition, rows) => {
      told.push(`committed ${rows.length}`)
      made.committed(partition, rows)
    }
  }
  const lookup = (entityType: string) =>
    Effect.succeed(entityType === TestEntity.name ? Option.some(registered) : Option.none())
  const transactions = yield* Semaphore.make(4)
  const fiber = yield* CommandProcessor.worker({ bus, relay, health, lookup, transactions })(claim).pipe(Effect.forkChild)
  const epochHeld = () => health.report().claimed.find((claimed) => claimed.partition === PARTITION)?.epoch
  const firstEpoch = yield* waitFor("the first claim", Effect.sync(() => Option.fromNullishOr(epochHeld())))
  return { records, owned, health, fiber, epochHeld, firstEpoch, told }
})

describe("CommandProcessor: the claim protocol", () => {
  it.live("run 3: a past generation's late claim does not take the partition from the node it is assigned to", () =>
    Effect.gen(function*() {
      const worker = yield* startWorker
      // node-1's worker of the short-lived generation claims after node-2 did: node-2 is now fenced.
      const stale = yield* PartitionFence.claim(Topics.commands, PARTITION, "node-1")
      assert.isTrue(stale > worker.firstEpoch)
      yield* Queue.offer(worker.records, command(0n, "run3-a", 1))
      // node-2 re-reads its assignment (still its own), claims again with a newer epoch and applies the command.
      const reply = yield* waitFor("the command's reply", replyOf("run3-a"))
      assert.strictEqual(reply._tag, "Success")
      const applied = (reply as { readonly value: { readonly node: string; readonly epoch: number } }).value
      assert.strictEqual(applied.node, "node-2")
      assert.isTrue(applied.epoch > stale, `applied under epoch ${applied.epoch}, after the stale ${stale}`)
      assert.strictEqual(worker.epochHeld(), applied.epoch)
      assert.strictEqual(yield* appliedCount("run3-a"), 1)
      // And it keeps serving: the next command goes through under the same epoch.
      yield* Queue.offer(worker.records, command(1n, "run3-b", 2))
      const next = yield* waitFor("the next reply", replyOf("run3-b"))
      assert.strictEqual((next as { readonly value: { readonly epoch: number } }).value.epoch, applied.epoch)
      assert.isUndefined(worker.fiber.pollUnsafe(), "the worker still runs")
      yield* Fiber.interrupt(worker.fiber)
    }).pipe(Effect.provide(Services)), { timeout: 60_000 })

  it.live("a fenced worker whose partition was assigned away stops, and applies nothing", () =>
    Effect.gen(function*() {
      const worker = yield* startWorker
      // The group moved the partition to node-3, which claimed it.
      worker.owned.current = false
      yield* PartitionFence.claim(Topics.commands, PARTITION, "node-3")
      yield* Queue.offer(worker.records, command(10n, "moved-a", 1))
      yield* Fiber.join(worker.fiber).pipe(Effect.timeout("20 seconds"), Effect.orDie)
      assert.strictEqual(yield* appliedCount("moved-a"), 0)
      assert.isUndefined(worker.epochHeld(), "the partition is no longer reported as claimed here")
      const owner = yield* SqlClient.SqlClient.pipe(Effect.flatMap((sql) =>
        sql<{ readonly owner: string }>`SELECT owner FROM partition_epochs
          WHERE topic = ${Topics.commands} AND partition = ${PARTITION}`
      ))
      assert.strictEqual(owner[0]!.owner, "node-3", "the stopped worker did not claim it back")
    }).pipe(Effect.provide(Services)), { timeout: 60_000 })

  it.live("a refused command (its declared error, rolled back) committed no outbox rows: the relay is not made to read the table", () =>
    Effect.gen(function*() {
      const worker = yield* startWorker
      const record = command(30n, "refused-a", 0)
      yield* Queue.offer(worker.records, { ...record, value: { ...(record.value as object), command: "Reject", payload: { reason: "no" } } })
      const told = yield* waitFor("the worker to tell the relay", Effect.sync(() => Option.fromNullishOr(worker.told[0])))
      assert.strictEqual(told, "committed 0")
      const reply = yield* waitFor("the stored reply", replyOf("refused-a"))
      assert.strictEqual(reply._tag, "Failure")
      assert.strictEqual(yield* appliedCount("refused-a"), 0, "rolled back")
      yield* Fiber.interrupt(worker.fiber)
    }).pipe(Effect.provide(Services)), { timeout: 60_000 })

  it.live("every line logged while a command is handled names its command_id (from the record's header)", () =>
    Effect.gen(function*() {
      const worker = yield* startWorker
      // A command the entity does not have is settled as failed, and that is logged.
      const record = command(20n, "logged-a", 1)
      yield* Queue.offer(worker.records, {
        ...record,
        value: { ...(record.value as object), command: "NoSuchCommand" },
        headers: { "command-id": "logged-a" }
      })
      yield* waitFor("the settled reply", replyOf("logged-a"))
      const settled = logged.find((line) => JSON.stringify(line.message).includes("settled as failed"))
      assert.isDefined(settled, "the failure was logged")
      assert.strictEqual(settled!.annotations.command_id, "logged-a")
      assert.strictEqual(settled!.annotations.partition, PARTITION)
      yield* Fiber.interrupt(worker.fiber)
    }).pipe(Effect.provide(Services), Effect.provide(CaptureLogs)), { timeout: 60_000 })
})
