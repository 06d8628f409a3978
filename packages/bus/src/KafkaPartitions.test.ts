import { assert, describe, it } from "@effect/vitest"
import { type Cause, Effect, Fiber, Queue, Stream } from "effect"
import { canRewind, feedRecords, toRecord } from "./KafkaPartitions.ts"

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

  it.effect("a feed stops handing out records at the stop: the one in hand is finished, the queued ones are left", () =>
    Effect.gen(function*() {
      const queue = yield* Queue.bounded<number, Cause.Done>(16)
      yield* Queue.offerAll(queue, [1, 2, 3, 4, 5])
      let stopped = false
      const handled: Array<number> = []
      yield* feedRecords(queue, () => stopped).pipe(
        Stream.runForEach((n) =>
          Effect.sync(() => {
            handled.push(n)
            // The stop comes while record 2 is in hand (all five were taken from the queue in one go).
            if (n === 2) {
              stopped = true
              Queue.endUnsafe(queue)
            }
          })
        )
      )
      assert.deepStrictEqual(handled, [1, 2])
    }))

  it.effect("a reader waiting on an empty feed ends when the feed is ended", () =>
    Effect.gen(function*() {
      const queue = yield* Queue.bounded<number, Cause.Done>(16)
      const reader = yield* Effect.forkChild(Stream.runCollect(feedRecords(queue, () => false)))
      yield* Effect.yieldNow
      yield* Queue.end(queue)
      assert.deepStrictEqual(yield* Fiber.join(reader), [])
    }))
})
