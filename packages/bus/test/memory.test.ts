/**
 * The contract on MemoryBus: several simulated nodes on one MemoryBroker,
 * sharing one in-memory PGlite database.
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Context, Effect, Exit, Layer, Option, Queue, Scope, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { Bus } from "../src/Bus.ts"
import { EntityRuntime } from "../src/EntityRuntime.ts"
import * as Inbox from "../src/Inbox.ts"
import { MemoryBroker } from "../src/MemoryBroker.ts"
import * as MemoryBus from "../src/MemoryBus.ts"
import type { DeadLetter } from "../src/Messages.ts"
import { partitionFor } from "../src/murmur2.ts"
import * as Topics from "../src/Topics.ts"
import { Cluster, contract } from "./contract.ts"
import { createTables, TestEntity, TestHandlers } from "./support/TestEntity.ts"

const node = (nodeId: string) =>
  TestHandlers.pipe(Layer.provideMerge(EntityRuntime.layer()), Layer.provide(MemoryBus.layer({ nodeId })))

const ClusterLive = Layer.effect(
  Cluster,
  Effect.gen(function*() {
    const broker = yield* MemoryBroker
    const context = yield* Effect.context<MemoryBroker | SqlClient.SqlClient>()
    return Cluster.of({
      failover: "1 second",
      start: (nodeId) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const stop = Scope.close(scope, Exit.void)
          yield* Effect.addFinalizer(() => stop)
          yield* Layer.buildWithScope(node(nodeId), scope).pipe(Effect.provideContext(context))
          return { nodeId, stop, kill: broker.kill(nodeId).pipe(Effect.andThen(stop)) }
        })
    })
  })
)

const Database = Layer.effectDiscard(Effect.andThen(Migrations.run, createTables)).pipe(
  Layer.provideMerge(DbEmbedded.layer({}))
)

contract(
  "entity runtime on MemoryBus",
  ClusterLive.pipe(
    Layer.provideMerge(EntityRuntime.layer({ host: false })),
    Layer.provideMerge(MemoryBus.layer({ nodeId: "client" })),
    Layer.provideMerge(MemoryBroker.layer),
    Layer.provideMerge(Database)
  )
)

describe("an embedded restart", () => {
  it.effect("settles the commands still in flight in the inbox as failed, and only with settleInFlightOnStart", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const entry = (commandId: string) => ({ commandId, entityType: "ContractTest", entityId: "x", command: "Apply", partition: 0 })
      yield* Inbox.register({ ...entry("lost-1"), owner: "alice" })
      yield* Inbox.register(entry("lost-2"))
      yield* Inbox.settle(entry("done-1"), { _tag: "Success", value: null })
      const start = (settle: boolean) =>
        Effect.scoped(Layer.build(
          TestHandlers.pipe(
            Layer.provideMerge(EntityRuntime.layer({ settleInFlightOnStart: settle })),
            Layer.provide(MemoryBus.layerEmbedded({ nodeId: `restart-${settle}` }))
          )
        ))
      yield* start(false)
      assert.strictEqual((yield* Inbox.read("lost-1")).pipe(Option.getOrThrow).reply, undefined)
      yield* start(true)
      for (const id of ["lost-1", "lost-2"]) {
        const reply = Option.getOrThrow(yield* Inbox.read(id)).reply
        assert.strictEqual(reply?._tag, "Defect")
      }
      assert.deepStrictEqual(Option.getOrThrow(yield* Inbox.read("done-1")).reply, { _tag: "Success", value: null })
      assert.strictEqual(Option.getOrThrow(yield* Inbox.read("lost-1")).owner, "alice")
      const rows = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM command_inbox WHERE reply IS NULL`
      assert.strictEqual(rows[0]!.n, 0)
    }).pipe(Effect.provide(Database)))
})

describe("unknown commands", () => {
  it.live("an unknown entity type or command is settled and dead-lettered at once; the partition's next command is not delayed", () =>
    Effect.gen(function*() {
      // Past the registration grace of a node's start (here none): what no handler knows now, none will.
      const context = yield* Layer.build(
        TestHandlers.pipe(
          Layer.provideMerge(EntityRuntime.layer({ registrationGrace: "0 millis" })),
          Layer.provideMerge(MemoryBus.layerEmbedded({ nodeId: "unknowns" }))
        )
      )
      const runtime = Context.get(context, EntityRuntime)
      const bus = Context.get(context, Bus)
      const letters = yield* Queue.unbounded<DeadLetter>()
      yield* bus.consume("unknowns-dead-letters", Topics.deadLetters, (claim) =>
        claim.records.pipe(Stream.runForEach((record) => Queue.offer(letters, record.value as DeadLetter))))
      let key = "k-0"
      for (let i = 0; partitionFor(key, 32) !== 7; i++) key = `k-${i}`
      yield* runtime.send(TestEntity, key, "Apply", { seq: 0 })
      const startedAt = yield* Clock.currentTimeMillis
      const record = (commandId: string, entityType: string, command: string) => ({
        topic: Topics.commands,
        key,
        value: { type: "grove.command", v: 1, commandId, entityType, entityId: key, command, payload: {} }
      })
      yield* bus.publish([record("unknown-type", "Nope", "y"), record("unknown-command", TestEntity.name, "Nope")])
      const next = yield* runtime.send(TestEntity, key, "Apply", { seq: 1 })
      const answeredIn = (yield* Clock.currentTimeMillis) - startedAt
      assert.strictEqual(next.seq, 1)
      assert.isBelow(answeredIn, 1000, `the next command on partition 7 answered after ${answeredIn} ms`)
      const first = yield* Queue.take(letters).pipe(Effect.timeout("1 second"), Effect.orDie)
      const second = yield* Queue.take(letters).pipe(Effect.timeout("1 second"), Effect.orDie)
      assert.deepStrictEqual([first.partition, second.partition], [7, 7])
      assert.match(first.reason, /unknown entity type Nope/)
      assert.match(second.reason, /ContractTest has no command Nope/)
      // Settled: their operations answer (as failed) instead of staying pending.
      for (const id of ["unknown-type", "unknown-command"]) {
        const reply = Option.getOrThrow(yield* runtime.operation(id)).reply
        assert.strictEqual(reply?._tag, "Defect")
      }
    }).pipe(Effect.scoped, Effect.provide(Database)), { timeout: 60_000 })
})
