import { assert, describe, it } from "@effect/vitest"
import { type Cause, Effect, Fiber, Queue, Stream } from "effect"
import { canRewind, stopFeed, toRecord } from "./KafkaPartitions.ts"

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
})
