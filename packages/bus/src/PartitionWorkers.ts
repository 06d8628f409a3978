/**
 * One fiber per owned partition, kept in line with the group's assignment.
 * Shared by both buses: each tells it which partitions this node owns in
 * which generation, and it starts and interrupts the workers.
 *
 * A worker that dies (a defect: a bug, since the command processor settles
 * every record one way or another) is started again from the group's committed
 * offset after a pause, as a rebalance would: the partition is given back to
 * this node rather than left idle while the node lives. After `maxRestarts`
 * deaths in a row it stays down (the node reports it; see `PartitionHealth`).
 */
import { Cause, Duration, Effect, Exit, Fiber, Latch } from "effect"
import type { Scope } from "effect"

interface Worker {
  readonly generation: number
  readonly fiber: Fiber.Fiber<void>
}

export interface PartitionWorkers {
  /**
   * The node owns exactly `owned` in `generation`: interrupts (and awaits) the
   * workers of partitions it lost, starts workers for owned partitions that
   * have none. A worker that ended by itself (it found the partition no longer
   * assigned here) is restarted only by a later generation.
   */
  readonly sync: (owned: ReadonlyArray<number>, generation: number) => Effect.Effect<void>
  /** Interrupts (and awaits) the workers of `partitions`. */
  readonly revoke: (partitions: Iterable<number>) => Effect.Effect<void>
  /**
   * A graceful stop: waits up to `deadline` for the workers of `partitions` running now to end by
   * themselves (the caller has closed their intake, so each finishes the record in hand), then interrupts
   * those still running and answers their partitions.
   */
  readonly finish: (partitions: Iterable<number>, deadline: Duration.Input) => Effect.Effect<ReadonlyArray<number>>
  /** Partitions with a running worker. */
  readonly running: () => ReadonlyArray<number>
}

/**
 * `prepare(partition, generation)` runs before `sync` returns (so a dispatcher
 * can route records to the partition as soon as `sync` is done) and returns
 * the worker, which runs in its own fiber.
 */
export interface RestartOptions {
  /** Deaths in a row after which a partition's worker stays down. Default 5. */
  readonly maxRestarts?: number | undefined
  /** The pause before the first restart; doubled for each death in a row. Default 1 second. */
  readonly pause?: Duration.Input | undefined
}

export const make = (
  prepare: (partition: number, generation: number) => Effect.Effect<Effect.Effect<void>>,
  restart: RestartOptions = {}
): Effect.Effect<PartitionWorkers, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const workers = new Map<number, Worker>()
    const endedAt = new Map<number, number>()
    const deaths = new Map<number, number>()
    const maxRestarts = restart.maxRestarts ?? 5
    const pause = Duration.toMillis(Duration.fromInputUnsafe(restart.pause ?? Duration.seconds(1)))

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

    const finish = (partitions: Iterable<number>, deadline: Duration.Input) =>
      Effect.suspend(() => {
        const awaited = [...partitions].flatMap((partition) => {
          const worker = workers.get(partition)
          return worker === undefined ? [] : [{ partition, fiber: worker.fiber }]
        })
        return Fiber.awaitAll(awaited.map(({ fiber }) => fiber)).pipe(
          Effect.timeoutOption(deadline),
          // Only the workers given the deadline are cut: one started meanwhile for the same partition (a
          // reconcile while the node stops) was reported as cut, and interrupted, though it had not been awaited.
          Effect.andThen(Effect.suspend(() => {
            const late = awaited.filter(({ fiber }) => fiber.pollUnsafe() === undefined)
            return Fiber.interruptAll(late.map(({ fiber }) => fiber)).pipe(Effect.as(late.map(({ partition }) => partition)))
          }))
        )
      })

    const start = (partition: number, generation: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        const worker = yield* prepare(partition, generation)
        // The worker waits until it is registered, so its `onExit` always finds it.
        const registered = Latch.makeUnsafe(false)
        const fiber: Fiber.Fiber<void> = yield* registered.await.pipe(
          Effect.andThen(worker),
          Effect.onExit((exit) =>
            Effect.suspend(() => {
              if (workers.get(partition)?.fiber !== fiber) return Effect.void
              workers.delete(partition)
              const died = Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)
              const count = died ? (deaths.get(partition) ?? 0) + 1 : 0
              deaths.set(partition, count)
              if (!died || count > maxRestarts) {
                endedAt.set(partition, generation)
                return Effect.void
              }
              // Started again unless the partition moved (or was started again) in the meantime.
              return Effect.sleep(pause * 2 ** (count - 1)).pipe(
                Effect.andThen(Effect.suspend(() =>
                  workers.has(partition) || endedAt.has(partition) || !owned.has(partition) || current !== generation
                    ? Effect.void
                    : start(partition, generation)
                )),
                Effect.forkIn(scope),
                Effect.asVoid
              )
            })
          ),
          Effect.forkIn(scope)
        )
        workers.set(partition, { generation, fiber })
        registered.openUnsafe()
      })

    /** What the node owns, as of the last `sync`. */
    let owned = new Set<number>()
    let current = -1

    const sync = (assigned: ReadonlyArray<number>, generation: number) =>
      Effect.gen(function*() {
        if (generation !== current) deaths.clear()
        // Owning nothing (the membership was lost), there is nothing to hold against a later generation,
        // whose numbering may start over if the group's state was lost.
        if (assigned.length === 0) endedAt.clear()
        owned = new Set(assigned)
        current = generation
        const keep = owned
        yield* revoke([...workers.keys()].filter((partition) => !keep.has(partition)))
        for (const partition of assigned) {
          if (workers.has(partition)) continue
          const ended = endedAt.get(partition)
          if (ended !== undefined && ended >= generation) continue
          endedAt.delete(partition)
          yield* start(partition, generation)
        }
      })

    return { sync, revoke, finish, running: () => [...workers.keys()] }
  })
