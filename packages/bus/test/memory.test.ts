/**
 * The contract on MemoryBus: several simulated nodes on one MemoryBroker,
 * sharing one in-memory PGlite database.
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { EntityRuntime } from "../src/EntityRuntime.ts"
import * as Inbox from "../src/Inbox.ts"
import { MemoryBroker } from "../src/MemoryBroker.ts"
import * as MemoryBus from "../src/MemoryBus.ts"
import { Cluster, contract } from "./contract.ts"
import { createTables, TestHandlers } from "./support/TestEntity.ts"

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
