import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as PartitionWorkers from "./PartitionWorkers.ts"

describe("PartitionWorkers", () => {
  it.effect("starts a died worker again after a pause, and leaves it down after repeated deaths", () =>
    Effect.gen(function*() {
      const starts: Array<number> = []
      let dieTimes = 0
      const workers = yield* PartitionWorkers.make((partition) =>
        Effect.succeed(Effect.suspend(() => {
          starts.push(partition)
          return starts.length <= dieTimes ? Effect.die(new Error("a bug")) : Effect.never
        })), { maxRestarts: 2, pause: "1 second" })

      // Dies once, then runs: started again after the pause, in the same generation.
      dieTimes = 1
      yield* workers.sync([3], 1)
      yield* Effect.yieldNow
      assert.deepStrictEqual(starts, [3])
      assert.deepStrictEqual(workers.running(), [])
      yield* TestClock.adjust("1 second")
      yield* Effect.yieldNow
      assert.deepStrictEqual(starts, [3, 3])
      assert.deepStrictEqual(workers.running(), [3])
      yield* workers.revoke([3])

      // Keeps dying: restarted maxRestarts times (pauses 1 s, 2 s), then left down until a new generation.
      starts.length = 0
      dieTimes = 100
      yield* workers.sync([5], 2)
      yield* Effect.yieldNow
      yield* TestClock.adjust("1 second")
      yield* Effect.yieldNow
      yield* TestClock.adjust("2 seconds")
      yield* Effect.yieldNow
      yield* TestClock.adjust("1 minute")
      yield* Effect.yieldNow
      assert.deepStrictEqual(starts, [5, 5, 5])
      assert.deepStrictEqual(workers.running(), [])
      yield* workers.sync([5], 2)
      assert.strictEqual(starts.length, 3, "not again in the same generation")
      dieTimes = 0
      yield* workers.sync([5], 3)
      yield* Effect.yieldNow
      assert.deepStrictEqual(workers.running(), [5])
    }).pipe(Effect.scoped))

  it.effect("does not start a died worker again once its partition moved away", () =>
    Effect.gen(function*() {
      const starts: Array<number> = []
      const workers = yield* PartitionWorkers.make((partition) =>
        Effect.succeed(Effect.suspend(() => {
          starts.push(partition)
          return Effect.die(new Error("a bug"))
        })))
      yield* workers.sync([1], 1)
      yield* Effect.yieldNow
      yield* workers.sync([], 2)
      yield* TestClock.adjust("10 seconds")
      yield* Effect.yieldNow
      assert.deepStrictEqual(starts, [1])
    }).pipe(Effect.scoped))

  it.effect("finish: waits for the workers to end by themselves up to the deadline, then interrupts the rest", () =>
    Effect.gen(function*() {
      const ended: Array<string> = []
      const release = yield* Deferred.make<void>()
      const workers = yield* PartitionWorkers.make((partition) =>
        Effect.succeed(
          // Partition 1 ends once released (its record in hand done); partition 2 never ends by itself.
          (partition === 1 ? Deferred.await(release) : Effect.never).pipe(
            Effect.onExit((exit) => Effect.sync(() => ended.push(`${partition}:${exit._tag}${exit._tag === "Failure" ? "(interrupted)" : ""}`)))
          )
        ))
      yield* workers.sync([1, 2], 1)
      yield* Effect.yieldNow
      const finishing = yield* Effect.forkChild(workers.finish([1, 2], "5 seconds"))
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(ended, [], "nothing is cut before the deadline")
      yield* Deferred.succeed(release, undefined)
      yield* Effect.yieldNow
      assert.deepStrictEqual(ended, ["1:Success"])
      yield* TestClock.adjust("4 seconds")
      assert.deepStrictEqual(yield* Fiber.join(finishing), [2], "the partitions cut at the deadline")
      assert.deepStrictEqual(ended, ["1:Success", "2:Failure(interrupted)"])
      assert.deepStrictEqual(workers.running(), [])
    }).pipe(Effect.scoped))

  it.effect("finish: a worker started for one of the partitions while it waits is not reported as cut, nor interrupted", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      const ended: Array<string> = []
      const workers = yield* PartitionWorkers.make((partition) =>
        Effect.succeed(
          (partition === 1 ? Deferred.await(release) : Effect.never).pipe(
            Effect.onExit((exit) => Effect.sync(() => ended.push(`${partition}:${exit._tag}`)))
          )
        ))
      yield* workers.sync([1], 1)
      yield* Effect.yieldNow
      // Partition 2 has no worker when the drain begins; a reconcile starts one while the drain waits.
      const finishing = yield* Effect.forkChild(workers.finish([1, 2], "5 seconds"))
      yield* Effect.yieldNow
      yield* workers.sync([1, 2], 1)
      yield* Effect.yieldNow
      yield* Deferred.succeed(release, undefined)
      assert.deepStrictEqual(yield* Fiber.join(finishing), [], "the awaited worker ended by itself")
      assert.deepStrictEqual(ended, ["1:Success"])
      assert.deepStrictEqual(workers.running(), [2])
    }).pipe(Effect.scoped))
})
