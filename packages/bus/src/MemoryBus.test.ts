import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Queue, Scope, Stream } from "effect"
import { Bus, type BusRecord } from "./Bus.ts"
import { assign, MemoryBroker } from "./MemoryBroker.ts"
import * as MemoryBus from "./MemoryBus.ts"
import { TopicSpec } from "./Topics.ts"

const topics = [new TopicSpec({ name: "t", partitions: 4, retentionMs: 60_000 })]

/** Starts a node in its own scope; closing the scope stops it. */
const startNode = (nodeId: string) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(MemoryBus.layer({ nodeId, topics }), scope)
    return { bus: Context.get(context, Bus), scope }
  })

const collect = (bus: Bus["Service"], group: string, scope: Scope.Scope) =>
  Effect.gen(function*() {
    const seen = yield* Queue.unbounded<{ readonly node: string; readonly record: BusRecord }>()
    yield* bus.consume(group, "t", (claim) =>
      claim.records.pipe(
        Stream.runForEach((record) =>
          Queue.offer(seen, { node: bus.nodeId, record }).pipe(Effect.andThen(claim.commit(record.offset)))
        )
      )).pipe(Scope.provide(scope))
    return seen
  })

describe("MemoryBroker.assign", () => {
  it("balances and keeps what it can", () => {
    const one = assign(8, ["a"], new Map())
    assert.deepStrictEqual([...one.values()].filter((o) => o === "a").length, 8)
    const two = assign(8, ["a", "b"], one)
    assert.strictEqual([...two.values()].filter((o) => o === "b").length, 4)
    // a keeps the partitions it had up to its share
    for (const [partition, owner] of two) if (owner === "a") assert.strictEqual(one.get(partition), "a")
    const three = assign(8, ["a", "b", "c"], two)
    const counts = ["a", "b", "c"].map((m) => [...three.values()].filter((o) => o === m).length)
    assert.isTrue(Math.max(...counts) - Math.min(...counts) <= 1)
  })
})

describe("MemoryBus", () => {
  it.live("keeps per-key order and moves partitions when a node joins and when one is killed", () =>
    Effect.gen(function*() {
      const broker = yield* MemoryBroker
      const a = yield* startNode("a")
      const seen = yield* collect(a.bus, "g", a.scope)
      assert.strictEqual(broker.assignment("g", "t").size, 4)
      const keys = ["k0", "k1", "k2", "k3", "k4"]
      for (let i = 0; i < 20; i++) yield* a.bus.publish([{ topic: "t", key: keys[i % 5]!, value: { type: "x", v: 1, i } }])
      const first = yield* Queue.takeN(seen, 20)
      for (const key of keys) {
        const order = first.filter((s) => s.record.key === key).map((s) => (s.record.value as { i: number }).i)
        assert.deepStrictEqual(order, [...order].sort((x, y) => x - y))
      }

      const b = yield* startNode("b")
      const seenB = yield* collect(b.bus, "g", b.scope)
      const owners = [...broker.assignment("g", "t").values()]
      assert.strictEqual(owners.filter((o) => o === "b").length, 2)
      const bKey = Array.from({ length: 100 }, (_, i) => `key-${i}`).find((key) =>
        broker.assignment("g", "t").get(b.bus.partitionFor("t", key)) === "b"
      )
      assert.isDefined(bKey)
      yield* a.bus.publish([{ topic: "t", key: bKey, value: { type: "x", v: 1, i: 100 } }])
      const atB = yield* Queue.take(seenB)
      assert.strictEqual(atB.record.key, bKey)

      // b dies without committing anything more: a takes its partitions back and resumes after b's last commit
      yield* broker.kill("b")
      yield* Scope.close(b.scope, Exit.void)
      assert.deepStrictEqual(new Set(broker.assignment("g", "t").values()), new Set(["a"]))
      yield* a.bus.publish([{ topic: "t", key: bKey, value: { type: "x", v: 1, i: 101 } }])
      // 100 again first if b's commit of it had not been flushed when it died
      let atA = yield* Queue.take(seen)
      if ((atA.record.value as { i: number }).i === 100) atA = yield* Queue.take(seen)
      assert.strictEqual((atA.record.value as { i: number }).i, 101)
      yield* Scope.close(a.scope, Exit.void)
    }).pipe(Effect.provide(MemoryBroker.layer)), { timeout: 10_000 })

  it.live("answers requests to the requesting node", () =>
    Effect.gen(function*() {
      const a = yield* startNode("a")
      const b = yield* startNode("b")
      const served = yield* Deferred.make<void>()
      yield* b.bus.consume("g", "t", (claim) =>
        claim.records.pipe(Stream.runForEach((record) =>
          (record.value as { type: string }).type === "ping"
            ? b.bus.reply(record, { type: "pong", v: 1, to: (record.value as { n: number }).n }).pipe(
              Effect.andThen(Deferred.succeed(served, undefined)),
              Effect.orDie
            )
            : Effect.void
        ))).pipe(Scope.provide(b.scope))
      const pending = yield* a.bus.request({ topic: "t", key: "x", value: { type: "ping", v: 1, n: 7 } }, "5 seconds")
      const answer = yield* pending.await
      assert.deepStrictEqual(answer.value, { type: "pong", v: 1, to: 7 })
      const timedOut = yield* a.bus.request({ topic: "t", key: "y", value: { type: "ignored", v: 1 } }, 50).pipe(
        Effect.flatMap((p) => Effect.flip(p.await))
      )
      assert.strictEqual(timedOut._tag, "RequestTimeout")
      yield* Scope.close(b.scope, Exit.void)
      yield* Scope.close(a.scope, Exit.void)
    }).pipe(Effect.provide(MemoryBroker.layer)), { timeout: 10_000 })

  it.live("a request still waiting when its node's bus closes fails at once, not at its deadline", () =>
    Effect.gen(function*() {
      const a = yield* startNode("a")
      // Nobody consumes "t": no reply comes.
      const pending = yield* a.bus.request({ topic: "t", key: "z", value: { type: "unanswered", v: 1 } }, "60 seconds")
      const waiting = yield* Effect.forkChild(Effect.flip(pending.await))
      yield* Scope.close(a.scope, Exit.void)
      const failed = yield* Fiber.join(waiting).pipe(Effect.timeout("5 seconds"))
      assert.strictEqual(failed._tag, "RequestTimeout")
    }).pipe(Effect.provide(MemoryBroker.layer)), { timeout: 10_000 })

  it.live("a request with an infinite deadline waits (setTimeout would fire it at once)", () =>
    Effect.gen(function*() {
      const a = yield* startNode("a")
      const pending = yield* a.bus.request({ topic: "t", key: "z", value: { type: "unanswered", v: 1 } }, Duration.infinity)
      const waited = yield* pending.await.pipe(Effect.timeoutOption("300 millis"))
      assert.isTrue(Option.isNone(waited))
      yield* Scope.close(a.scope, Exit.void)
    }).pipe(Effect.provide(MemoryBroker.layer)), { timeout: 10_000 })

  it.live("refuses a topic whose partition count differs from the declaration", () =>
    Effect.gen(function*() {
      yield* startNode("a")
      const other = [new TopicSpec({ name: "t", partitions: 8, retentionMs: 60_000 })]
      const error = yield* Layer.build(MemoryBus.layer({ nodeId: "b", topics: other })).pipe(Effect.flip)
      assert.strictEqual(error._tag, "BusError")
      assert.include(error.message, "has 4 partitions, 8 are declared")
    }).pipe(Effect.scoped, Effect.provide(MemoryBroker.layer)))
})
