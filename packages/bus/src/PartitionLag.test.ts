import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Layer, Queue, Scope, Stream } from "effect"
import { Bus } from "./Bus.ts"
import { MemoryBroker } from "./MemoryBroker.ts"
import * as MemoryBus from "./MemoryBus.ts"
import { partitionFor } from "./murmur2.ts"
import * as PartitionLag from "./PartitionLag.ts"
import { TopicSpec } from "./Topics.ts"

const topics = [new TopicSpec({ name: "t", partitions: 4, retentionMs: 60_000 })]

describe("PartitionLag", () => {
  it.effect("is the end offset minus the next to process, per partition with a worker, never below 0", () =>
    Effect.gen(function*() {
      const ends = new Map([[0, 10n], [1, 3n]])
      const lag = PartitionLag.make("g", "t", (partitions) =>
        Effect.succeed(new Map(partitions.filter((p) => ends.has(p)).map((p) => [p, ends.get(p)!]))))
      assert.deepStrictEqual(yield* lag.read, [])
      lag.started(0, 4n)
      lag.started(1, 5n)
      lag.started(2, 0n) // its end unknown: left out
      assert.deepStrictEqual(yield* lag.read, [
        { group: "g", topic: "t", partition: 0, records: 6 },
        { group: "g", topic: "t", partition: 1, records: 0 }
      ])
      lag.processed(0, 9n)
      lag.processed(0, 7n) // an older mark does not move it back
      lag.stopped(1)
      assert.deepStrictEqual(yield* lag.read, [{ group: "g", topic: "t", partition: 0, records: 1 }])
    }))

  it.live("on the in-process bus: records published while the worker is held are its lag, 0 once it caught up", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const bus = Context.get(yield* Layer.buildWithScope(MemoryBus.layer({ nodeId: "a", topics }), scope), Bus)
      const release = yield* Deferred.make<void>()
      const done = yield* Queue.unbounded<bigint>()
      yield* bus.consume("g", "t", (claim) =>
        claim.records.pipe(Stream.runForEach((record) =>
          Deferred.await(release).pipe(
            Effect.andThen(claim.commit(record.offset)),
            Effect.andThen(Queue.offer(done, record.offset))
          )
        ))).pipe(Scope.provide(scope))
      const partition = partitionFor("k", 4)
      for (let i = 0; i < 3; i++) yield* bus.publish([{ topic: "t", key: "k", value: { type: "x", v: 1, i } }])
      const held = yield* bus.lag
      assert.strictEqual(held.length, 4)
      assert.deepStrictEqual(held.find((l) => l.partition === partition), { group: "g", topic: "t", partition, records: 3 })
      assert.isTrue(held.filter((l) => l.partition !== partition).every((l) => l.records === 0))
      yield* Deferred.succeed(release, undefined)
      yield* Queue.takeN(done, 3)
      assert.strictEqual((yield* bus.lag).find((l) => l.partition === partition)?.records, 0)
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(yield* bus.lag, [])
    }).pipe(Effect.provide(MemoryBroker.layer)))
})
