/**
 * One fiber per owned partition, kept in line with the group's assignment.
 * Shared by both buses: each tells it which partitions this node owns in
 * which generation, and it starts and interrupts the workers.
 */
import { Effect, Fiber, Latch } from "effect"
import type { Scope } from "effect"

interface Worker {
  readonly generation: number
  readonly fiber: Fiber.Fiber<void>
}

export interface PartitionWorkers {
  /**
   * The node owns exactly `owned` in `generation`: interrupts (and awaits) the
   * workers of partitions it lost, starts workers for owned partitions that
   * have none. A worker that ended by itself is restarted only by a later
   * generation, so a fenced partition stays idle until the next rebalance.
   */
  readonly sync: (owned: ReadonlyArray<number>, generation: number) => Effect.Effect<void>
  /** Interrupts (and awaits) the workers of `partitions`. */
  readonly revoke: (partitions: Iterable<number>) => Effect.Effect<void>
  /** Partitions with a running worker. */
  readonly running: () => ReadonlyArray<number>
}

/**
 * `prepare(partition, generation)` runs before `sync` returns (so a dispatcher
 * can route records to the partition as soon as `sync` is done) and returns
 * the worker, which runs in its own fiber.
 */
export const make = (
  prepare: (partition: number, generation: number) => Effect.Effect<Effect.Effect<void>>
): Effect.Effect<PartitionWorkers, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const workers = new Map<number, Worker>()
    const endedAt = new Map<number, number>()

    const revoke = (partitions: Iterable<number>) =>
      Effect.suspend(() => {
        const fibers: Array<Fiber.Fiber<void>> = []
        for (const partition of partitions) {
          const worker = workers.get(partition)
          if (worker !== undefined) {
            workers.delete(partition)
            fibers.push(worker.fiber)
          }
          endedAt.delete(partition)
        }
        return Fiber.interruptAll(fibers)
      })

    const start = Effect.fnUntraced(function*(partition: number, generation: number) {
      const worker = yield* prepare(partition, generation)
      // The worker waits until it is registered, so its `onExit` always finds it.
      const registered = Latch.makeUnsafe(false)
      const fiber: Fiber.Fiber<void> = yield* registered.await.pipe(
        Effect.andThen(worker),
        Effect.onExit(() =>
          Effect.sync(() => {
            if (workers.get(partition)?.fiber === fiber) {
              workers.delete(partition)
              endedAt.set(partition, generation)
            }
          })
        ),
        Effect.forkIn(scope)
      )
      workers.set(partition, { generation, fiber })
      registered.openUnsafe()
    })

    const sync = (owned: ReadonlyArray<number>, generation: number) =>
      Effect.gen(function*() {
        const keep = new Set(owned)
        yield* revoke([...workers.keys()].filter((partition) => !keep.has(partition)))
        for (const partition of owned) {
          if (workers.has(partition)) continue
          const ended = endedAt.get(partition)
          if (ended !== undefined && ended >= generation) continue
          endedAt.delete(partition)
          yield* start(partition, generation)
        }
      })

    return { sync, revoke, running: () => [...workers.keys()] }
  })
