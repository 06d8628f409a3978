/**
 * The entity runtime while its node stops. A server releases its entity handlers (the layers that
 * registered them) before the bus consumer's graceful drain begins: a command that reaches the
 * partition's worker in between must not hold the worker (the drain waits for every worker to end by
 * itself, and cut one at its deadline in the rolling-restart test). It is left to the next owner.
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Option, Schema, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { createTables, TestEntity, TestHandlers } from "../test/support/TestEntity.ts"
import * as Entity from "./Entity.ts"
import { EntityRuntime } from "./EntityRuntime.ts"
import * as Inbox from "./Inbox.ts"
import { MemoryBroker } from "./MemoryBroker.ts"
import * as MemoryBus from "./MemoryBus.ts"
import { partitionFor } from "./murmur2.ts"

const Database = Layer.effectDiscard(Effect.andThen(Migrations.run, createTables)).pipe(
  Layer.provideMerge(DbEmbedded.layer({}))
)

/** A node's runtime in a scope of its own, its handlers in another (closing that one unregisters them). */
const startNode = (nodeId: string) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const runtime = yield* Layer.buildWithScope(EntityRuntime.layer().pipe(Layer.provide(MemoryBus.layer({ nodeId }))), scope)
    const handlers = yield* Scope.make()
    yield* Layer.buildWithScope(TestHandlers, handlers).pipe(Effect.provideContext(runtime))
    return { runtime: Context.get(runtime, EntityRuntime), scope, handlers }
  })

/** Polls `check` every 25 ms until it answers, for at most `ms` (a loaded machine is slow). */
const waitUntil = <A, E, R>(what: string, check: Effect.Effect<Option.Option<A>, E, R>, ms = 20_000) =>
  Effect.gen(function*() {
    for (let waited = 0; waited < ms; waited += 25) {
      const found = yield* check
      if (Option.isSome(found)) return found.value
      yield* Effect.sleep(25)
    }
    return yield* Effect.die(new Error(`timed out after ${ms} ms waiting for ${what}`))
  })

describe("EntityRuntime while the node stops", () => {
  it.live("a command for an entity type unregistered as the node stops: its worker ends by itself, the next owner applies it", () =>
    Effect.gen(function*() {
      const a = yield* startNode("stop-a")
      let key = "k-0"
      for (let i = 0; partitionFor(key, 32) !== 7; i++) key = `k-${i}`
      // Partition 7's worker serves while the handlers are registered.
      assert.strictEqual((yield* a.runtime.send(TestEntity, key, "Apply", { seq: 0 })).node, "stop-a")
      const claimed7 = () => a.runtime.health().claimed.some((claim) => claim.partition === 7)
      assert.isTrue(claimed7())

      // The node stops: its handlers go first, then a command reaches partition 7 (sent by a node still running).
      yield* Scope.close(a.handlers, Exit.void)
      yield* a.runtime.submit(TestEntity, key, "Apply", { seq: 1 }, { commandId: "left-over" })
      // The worker ends by itself (before: it waited for the handlers for good, until the drain's deadline cut it).
      yield* waitUntil("partition 7's worker to end", Effect.sync(() => claimed7() ? Option.none() : Option.some(true)))
      const sql = yield* SqlClient.SqlClient
      const applied = () => sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM bus_test_applied WHERE seq = 1`
      assert.strictEqual((yield* applied())[0]!.n, 0, "nothing applied")
      assert.strictEqual(Option.getOrThrow(yield* Inbox.read("left-over")).reply, undefined, "not settled: still in flight")

      // The node leaves; the partition's next owner reads from the committed offset and applies the command once.
      yield* Scope.close(a.scope, Exit.void)
      const b = yield* startNode("stop-b")
      yield* Effect.addFinalizer(() => Scope.close(b.handlers, Exit.void).pipe(Effect.andThen(Scope.close(b.scope, Exit.void))))
      const reply = yield* waitUntil(
        "the next owner's reply",
        Effect.map(Inbox.read("left-over"), (operation) => Option.flatMap(operation, (op) => Option.fromNullishOr(op.reply)))
      )
      assert.strictEqual(reply._tag, "Success")
      assert.strictEqual((reply as { readonly value: { readonly node: string } }).value.node, "stop-b")
      assert.strictEqual((yield* applied())[0]!.n, 1, "applied once")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(MemoryBroker.layer, Database))), { timeout: 60_000 })
})

/** A command whose owner acts as one of an older version: the inbox row it records has no owner or fingerprint. */
const OlderOwner = Entity.make("OlderOwnerTest", { Slow: { payload: Schema.Struct({}), success: Schema.Boolean } })

describe("EntityRuntime in a cluster with an owner of an older version", () => {
  it.live("a fresh command that timed out is readable by its sender though the owner recorded it without owner and fingerprint", () =>
    Effect.gen(function*() {
      const node = yield* startNode("older-owner")
      yield* Effect.addFinalizer(() => Scope.close(node.handlers, Exit.void).pipe(Effect.andThen(Scope.close(node.scope, Exit.void))))
      yield* node.runtime.register(OlderOwner, {
        Slow: (_, context) =>
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            // Only a row this transaction inserted (the owner came first) is the older owner's: answers whether it was.
            const cleared = yield* sql`UPDATE command_inbox SET owner = NULL, fingerprint = NULL
              WHERE command_id = ${context.commandId} AND xmin::text = (txid_current() % 4294967296)::text RETURNING 1`
            // Past the sender's timeout: it records the command while this transaction holds the row.
            yield* Effect.sleep("7 seconds")
            return cleared.length === 1
          })
      })
      // The partition is claimed before the timed command is sent.
      yield* node.runtime.send(OlderOwner, "o-1", "Slow", {}, { timeout: "60 seconds" })
      const error = yield* Effect.flip(node.runtime.send(OlderOwner, "o-1", "Slow", {}, {
        owner: "alice",
        fingerprint: "POST /slow",
        timeout: "4 seconds"
      }))
      assert.strictEqual(error._tag, "CommandTimeout")
      const operationId = (error as { readonly operationId: string }).operationId
      const settled = yield* waitUntil(
        "the command's reply",
        Effect.map(node.runtime.operation(operationId), (operation) => Option.filter(operation, (op) => op.reply !== undefined))
      )
      // The owner handled it first (the case this is about), and the sender's record filled in what it left out.
      assert.deepStrictEqual(settled.reply, { _tag: "Success", value: true })
      assert.strictEqual(settled.owner, "alice")
      assert.strictEqual(settled.fingerprint, "POST /slow")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(MemoryBroker.layer, Database))), { timeout: 120_000 })
})

const NotedTest = Entity.make("NotedTest", {
  Write: { payload: Schema.Struct({ n: Schema.Number }), success: Schema.Struct({ n: Schema.Number }), note: Schema.Struct({ seen: Schema.Number }) }
})

describe("EntityRuntime: a handler's note for the sending node", () => {
  it.live("goes with the live reply only: never stored, so a replay and the operation have none", () =>
    Effect.gen(function*() {
      const node = yield* startNode("noted")
      yield* Effect.addFinalizer(() => Scope.close(node.handlers, Exit.void).pipe(Effect.andThen(Scope.close(node.scope, Exit.void))))
      yield* node.runtime.register(NotedTest, { Write: ({ n }) => Effect.succeed(Entity.noted({ n }, { seen: n * 10 })) })
      const live = yield* node.runtime.sendNoted(NotedTest, "n-1", "Write", { n: 4 }, { commandId: "noted-1", owner: "alice" })
      assert.deepStrictEqual(live, { value: { n: 4 }, note: { seen: 40 } })
      // The stored reply (what a replay and GET /operations read) is the success alone.
      const operation = yield* node.runtime.operation("noted-1")
      assert.deepStrictEqual(Option.getOrThrow(operation).reply, { _tag: "Success", value: { n: 4 } })
      const replayed = yield* node.runtime.sendNoted(NotedTest, "n-1", "Write", { n: 4 }, { commandId: "noted-1", owner: "alice" })
      assert.deepStrictEqual(replayed, { value: { n: 4 }, note: undefined })
      // `send` answers the success alone.
      assert.deepStrictEqual(yield* node.runtime.send(NotedTest, "n-1", "Write", { n: 5 }), { n: 5 })
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(MemoryBroker.layer, Database))), { timeout: 120_000 })
})
