/**
 * What the partition workers of one node report about themselves: which
 * partitions are stuck retrying (the database or the bus cannot be reached)
 * and since when, and which lost their worker for good. A node with a
 * partition stuck for long, or one without a worker, is not ready.
 */
export interface Stall {
  readonly partition: number
  /** Epoch milliseconds of the first failed attempt in this run of failures. */
  readonly since: number
  readonly error: string
}

export interface HealthReport {
  /** Partitions a live worker of this node has claimed, with the epoch it holds. */
  readonly claimed: ReadonlyArray<{ readonly partition: number; readonly epoch: number }>
  readonly stalled: ReadonlyArray<Stall>
  /** Partitions whose worker died (a bug): restarted after a pause, and left down after repeated deaths. */
  readonly dead: ReadonlyArray<{ readonly partition: number; readonly error: string }>
}

export interface PartitionHealth {
  readonly stalled: (partition: number, error: string) => void
  readonly recovered: (partition: number) => void
  readonly died: (partition: number, error: string) => void
  /** A worker (again) holds the partition, under `epoch`. */
  readonly claimed: (partition: number, epoch: number) => void
  /** The partition is no longer this node's (revoked or fenced). */
  readonly released: (partition: number) => void
  readonly report: () => HealthReport
}

export const make = (now: () => number = Date.now): PartitionHealth => {
  const stalls = new Map<number, Stall>()
  const dead = new Map<number, string>()
  const claims = new Map<number, number>()
  /** Claimed afresh or gone from this node: nothing to report for the partition either way. */
  const forget = (partition: number) => {
    stalls.delete(partition)
    dead.delete(partition)
    claims.delete(partition)
  }
  return {
    stalled: (partition, error) => {
      const current = stalls.get(partition)
      stalls.set(partition, { partition, since: current?.since ?? now(), error })
    },
    recovered: (partition) => {
      stalls.delete(partition)
    },
    died: (partition, error) => {
      stalls.delete(partition)
      claims.delete(partition)
      dead.set(partition, error)
    },
    claimed: (partition, epoch) => {
      forget(partition)
      claims.set(partition, epoch)
    },
    released: forget,
    report: () => ({
      claimed: [...claims].map(([partition, epoch]) => ({ partition, epoch })).sort((a, b) => a.partition - b.partition),
      stalled: [...stalls.values()].sort((a, b) => a.partition - b.partition),
      dead: [...dead].map(([partition, error]) => ({ partition, error })).sort((a, b) => a.partition - b.partition)
    })
  }
}
