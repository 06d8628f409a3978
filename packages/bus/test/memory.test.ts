/**
 * The contract on MemoryBus: several simulated nodes on one MemoryBroker,
 * sharing one in-memory PGlite database.
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { Effect, Exit, Layer, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { EntityRuntime } from "../src/EntityRuntime.ts"
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
