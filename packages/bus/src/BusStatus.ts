/**
 * What a bus knows of itself, for health: whether the broker answers, and per
 * consumer group whether this node is a member and which partitions the
 * group's latest generation gives it. Both buses keep one `Tracker` and hand
 * its `status` out as `Bus.status`.
 */
import { Deferred, Effect } from "effect"
import * as PartitionLag from "./PartitionLag.ts"

export interface GroupStatus {
  readonly group: string
  readonly topic: string
  /** Whether this node is a member of the group right now. */
  readonly joined: boolean
  /** The group generation of the assignment below (-1 before the first). */
  readonly generation: number
  /** The partitions the group gives this node (none while it is not a member). */
  readonly assigned: ReadonlyArray<number>
  /** While not joined: since when (epoch milliseconds) and why. */
  readonly since?: number | undefined
  readonly error?: string | undefined
}

export interface BusStatus {
  /** Whether the broker answered this node's last attempt to reach it. */
  readonly reachable: boolean
  /** While unreachable: since when (epoch milliseconds) and why. */
  readonly since?: number | undefined
  readonly error?: string | undefined
  readonly groups: ReadonlyArray<GroupStatus>
}

export interface GroupTracker {
  readonly joined: (generation: number, assigned: ReadonlyArray<number>) => void
  /** Membership lost (or not yet gained): owns nothing until `joined` again. */
  readonly left: (error: string) => void
  readonly current: () => GroupStatus
  /** The group is no longer consumed here. */
  readonly remove: () => void
}

export interface Tracker {
  readonly reachable: () => void
  readonly unreachable: (error: string) => void
  /** Completes when the broker next answers after being unreachable (a rejoin need not wait out its backoff). */
  readonly recovered: Effect.Effect<void>
  /** Whether the broker answered the last attempt to reach it. */
  readonly up: () => boolean
  readonly group: (group: string, topic: string) => GroupTracker
  readonly status: () => BusStatus
  /** The consumer groups' lag, registered by `consume` (for `/metrics`). */
  readonly lag: PartitionLag.Registry
}

export const make = (now: () => number = Date.now): Tracker => {
  let down: { readonly since: number; readonly error: string } | undefined
  let back = Deferred.makeUnsafe<void>()
  const groups = new Map<string, GroupStatus>()
  return {
    reachable: () => {
      if (down === undefined) return
      down = undefined
      Deferred.doneUnsafe(back, Effect.void)
      back = Deferred.makeUnsafe<void>()
    },
    recovered: Effect.suspend(() => Deferred.await(back)),
    up: () => down === undefined,
    unreachable: (error) => {
      down = { since: down?.since ?? now(), error }
    },
    group: (group, topic) => {
      const key = `${group}\u0000${topic}`
      groups.set(key, { group, topic, joined: false, generation: -1, assigned: [], since: now(), error: "joining" })
      const current = () => groups.get(key)!
      return {
        joined: (generation, assigned) => {
          groups.set(key, { group, topic, joined: true, generation, assigned: [...assigned].sort((a, b) => a - b) })
        },
        left: (error) => {
          const before = current()
          groups.set(key, {
            group,
            topic,
            joined: false,
            generation: before.generation,
            assigned: [],
            since: before.joined ? now() : before.since ?? now(),
            error
          })
        },
        current,
        remove: () => {
          groups.delete(key)
        }
      }
    },
    lag: PartitionLag.registry(),
    status: () => ({
      reachable: down === undefined,
      ...(down === undefined ? {} : { since: down.since, error: down.error }),
      groups: [...groups.values()]
    })
  }
}
