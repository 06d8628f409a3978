/**
 * Consumer lag, for `/metrics`: per consumer group and partition this node consumes, how many records
 * wait after the last one its worker processed (the partition's end offset, its high watermark, minus
 * the next offset to process). Read only when asked (a scrape): one offsets request per group to the
 * broker, nothing in the background. For the commands topic this is each partition's command queue.
 */
import { Effect } from "effect"
import type { Scope } from "effect"

export interface PartitionLag {
  readonly group: string
  readonly topic: string
  readonly partition: number
  /** Records not processed yet by this node's worker of the partition. */
  readonly records: number
}

/** One group's partitions on this node: where each worker is. */
export interface GroupLag {
  /** A worker starts at `next`. */
  readonly started: (partition: number, next: bigint) => void
  /** The worker processed every record before `next`. */
  readonly processed: (partition: number, next: bigint) => void
  readonly stopped: (partition: number) => void
  readonly read: Effect.Effect<ReadonlyArray<PartitionLag>>
}

/** `ends` answers the end offsets of the partitions asked for (the ones it cannot read left out). */
export const make = (
  group: string,
  topic: string,
  ends: (partitions: ReadonlyArray<number>) => Effect.Effect<ReadonlyMap<number, bigint>>
): GroupLag => {
  const next = new Map<number, bigint>()
  return {
    started: (partition, offset) => next.set(partition, offset),
    processed: (partition, offset) => {
      const at = next.get(partition)
      if (at !== undefined && at < offset) next.set(partition, offset)
    },
    stopped: (partition) => next.delete(partition),
    read: Effect.suspend(() => {
      const partitions = [...next.keys()]
      if (partitions.length === 0) return Effect.succeed([])
      return Effect.map(ends(partitions), (end) =>
        partitions.flatMap((partition) => {
          const last = end.get(partition)
          const at = next.get(partition)
          return last === undefined || at === undefined
            ? []
            : [{ group, topic, partition, records: last > at ? Number(last - at) : 0 }]
        }))
    })
  }
}

/** The groups consumed on this node, each read when `read` is. */
export interface Registry {
  readonly add: (lag: GroupLag) => Effect.Effect<void, never, Scope.Scope>
  readonly read: Effect.Effect<ReadonlyArray<PartitionLag>>
}

export const registry = (): Registry => {
  const groups = new Set<GroupLag>()
  return {
    add: (lag) => Effect.acquireRelease(Effect.sync(() => groups.add(lag)), () => Effect.sync(() => groups.delete(lag))),
    read: Effect.suspend(() =>
      Effect.map(Effect.all([...groups].map((group) => group.read), { concurrency: "unbounded" }), (lags) => lags.flat())
    )
  }
}
