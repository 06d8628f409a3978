import { assert, describe, it } from "@effect/vitest"
import { type Cause, Effect, Fiber, Option, Queue, Stream } from "effect"
import { TestClock } from "effect/testing"
import { awaitStartOffset, canRewind, stopFeed, toRecord } from "./KafkaPartitions.ts"

describe("KafkaPartitions", () => {
  it("finds the stream method it uses to go back to the committed offsets", () => {
    // a private method of @platformatic/kafka's MessagesStream: an upgrade that drops it fails here
    assert.isTrue(canRewind)
  })

  it("turns messages into records under the declared topic name, JSON parsed when it is JSON", () => {
    const message = (value: string) => ({
      topic: "prefix.grove.events",
      partition: 2,
      offset: 7n,
      key: "k",
      value,
      headers: new Map([["event-id", "e1"]])
    }) as never
    assert.deepStrictEqual(toRecord("grove.events", message(`{"type":"x","v":1}`)), {
      topic: "grove.events",
      partition: 2,
      offset: 7n,
      key: "k",
      value: { type: "x", v: 1 },
      headers: { "event-id": "e1" }
    })
    assert.strictEqual(toRecord("grove.events", message("not json")).value, "not json")
  })

  it.effect("a stopped feed leaves the records not taken yet, and its reader ends", () =>
    Effect.gen(function*() {
      const queue = yield* Queue.bounded<number, Cause.Done>(16)
      yield* Queue.offerAll(queue, [1, 2, 3])
      yield* stopFeed(queue)
      assert.deepStrictEqual(yield* Stream.runCollect(Stream.fromQueue(queue)), [])
    }))

  it.effect("a reader waiting on an empty feed ends when the feed is stopped", () =>
    Effect.gen(function*() {
      const queue = yield* Queue.bounded<number, Cause.Done>(16)
      const reader = yield* Effect.forkChild(Stream.runCollect(Stream.fromQueue(queue)))
      yield* Effect.yieldNow
      yield* stopFeed(queue)
      assert.deepStrictEqual(yield* Fiber.join(reader), [])
    }))

  it.effect("a new worker's start offset is read again while Kafka does not answer, and given up once the partition is not this node's", () =>
    Effect.gen(function*() {
      let reads = 0
      let owned = true
      const read = Effect.suspend(() => {
        reads++
        return Effect.fail("not a member of the group right now")
      })
      const waiting = yield* Effect.forkChild(awaitStartOffset(read, () => owned, () => false))
      yield* TestClock.adjust("1 minute")
      assert.isUndefined(waiting.pollUnsafe(), "still waiting for Kafka")
      assert.isAbove(reads, 5)
      // The membership was lost (the partition is nobody's here now): the wait ends, within one backoff.
      owned = false
      yield* TestClock.adjust("5 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.join(waiting)))
      // And the stop ends it too; an answer is taken as it comes.
      owned = true
      let stopping = false
      const stopped = yield* Effect.forkChild(awaitStartOffset(read, () => owned, () => stopping))
      stopping = true
      yield* TestClock.adjust("5 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.join(stopped)))
      assert.deepStrictEqual(yield* awaitStartOffset(Effect.succeed(42n), () => owned, () => false), Option.some(42n))
    }))
})
