/**
 * An in-process broker for embedded mode and for simulating several nodes in
 * one process: each topic partition is an ordered log, each consumer group
 * keeps committed offsets and assigns partitions among its live members.
 * Joining or leaving rebalances gracefully (a partition is revoked from its
 * old owner before its new owner starts); killing a node is abrupt: its
 * partitions move without a revoke and its later commits are ignored, like a
 * crashed process.
 */
import { Clock, Context, Deferred, Effect, Exit, Layer, Semaphore } from "effect"
import { type BusRecord, BusError } from "./Bus.ts"
import type { TopicSpec } from "./Topics.ts"

/** A group member: the broker tells it what it owns. */
export interface MemoryMember {
  readonly nodeId: string
  /** This member owns exactly `partitions` in `generation`. */
  readonly assigned: (partitions: ReadonlyArray<number>, generation: number) => Effect.Effect<void>
  /** Stop working on `partitions` (graceful revoke); done when the workers have stopped. */
  readonly revoke: (partitions: ReadonlyArray<number>) => Effect.Effect<void>
}

interface Log {
  /** Offset of `records[0]`. */
  base: bigint
  records: Array<BusRecord & { readonly at: number }>
  waiters: Array<Deferred.Deferred<void>>
}

interface Topic {
  readonly spec: TopicSpec
  readonly logs: ReadonlyArray<Log>
}

interface Group {
  readonly topic: string
  readonly members: Map<string, MemoryMember>
  assignment: Map<number, string>
  readonly committed: Map<number, bigint>
  generation: number
}

export interface MemoryBrokerShape {
  readonly ensureTopics: (specs: ReadonlyArray<TopicSpec>) => Effect.Effect<void, BusError>
  readonly append: (
    topic: string,
    partition: number,
    key: string,
    value: unknown,
    headers: Readonly<Record<string, string>>
  ) => Effect.Effect<void, BusError>
  /** The offset the next record appended to a partition will get. */
  readonly end: (topic: string, partition: number) => bigint
  /** The records of a partition from `from` on; waits until there is at least one. */
  readonly read: (topic: string, partition: number, from: bigint) => Effect.Effect<ReadonlyArray<BusRecord>>
  readonly join: (group: string, topic: string, member: MemoryMember) => Effect.Effect<void, BusError>
  /** Graceful leave: the member's partitions are revoked, then handed to the others. */
  readonly leave: (group: string, topic: string, nodeId: string) => Effect.Effect<void>
  /** The next offset the group reads from `partition`. */
  readonly committed: (group: string, topic: string, partition: number) => bigint
  /** Ignored unless `nodeId` is alive and owns the partition (a dead or fenced owner's commit is lost). */
  readonly commit: (group: string, topic: string, partition: number, nodeId: string, next: bigint) => Effect.Effect<void>
  /** Registers a live node and where its replies go. */
  readonly register: (nodeId: string, onReply: (record: BusRecord) => Effect.Effect<void>) => Effect.Effect<void, BusError>
  /** Undoes `register` (only that registration: a node restarted under the same id stays). */
  readonly unregister: (nodeId: string, onReply: (record: BusRecord) => Effect.Effect<void>) => Effect.Effect<void>
  readonly deliverReply: (replyTo: string, record: BusRecord) => Effect.Effect<void>
  /** Abrupt death: no revoke, no further commits; the survivors take the node's partitions. */
  readonly kill: (nodeId: string) => Effect.Effect<void>
  readonly isAlive: (nodeId: string) => boolean
  /** Who owns which partition of `topic` in `group` (for tests and diagnostics). */
  readonly assignment: (group: string, topic: string) => ReadonlyMap<number, string>
}

const groupKey = (group: string, topic: string) => `${group}\u0000${topic}`

/**
 * Sticky and balanced: every member keeps what it owned up to ceil(N/M)
 * partitions, the rest goes to the least loaded members.
 */
export const assign = (
  partitions: number,
  members: ReadonlyArray<string>,
  previous: ReadonlyMap<number, string>
): Map<number, string> => {
  const next = new Map<number, string>()
  if (members.length === 0) return next
  const sorted = [...members].sort()
  const quota = Math.ceil(partitions / sorted.length)
  const load = new Map(sorted.map((member) => [member, 0]))
  for (let partition = 0; partition < partitions; partition++) {
    const owner = previous.get(partition)
    const owned = owner === undefined ? undefined : load.get(owner)
    if (owner !== undefined && owned !== undefined && owned < quota) {
      next.set(partition, owner)
      load.set(owner, owned + 1)
    }
  }
  for (let partition = 0; partition < partitions; partition++) {
    if (next.has(partition)) continue
    let least = sorted[0]!
    for (const member of sorted) if (load.get(member)! < load.get(least)!) least = member
    next.set(partition, least)
    load.set(least, load.get(least)! + 1)
  }
  return next
}

const make: Effect.Effect<MemoryBrokerShape> = Effect.gen(function*() {
  const topics = new Map<string, Topic>()
  const groups = new Map<string, Group>()
  const nodes = new Map<string, (record: BusRecord) => Effect.Effect<void>>()
  // Membership changes run one at a time, as a group coordinator would.
  const membership = yield* Semaphore.make(1)

  const topicOf = (name: string) =>
    Effect.suspend(() => {
      const topic = topics.get(name)
      return topic === undefined
        ? Effect.fail(new BusError({ message: `topic ${name} does not exist` }))
        : Effect.succeed(topic)
    })

  const ensureTopics = (specs: ReadonlyArray<TopicSpec>) =>
    Effect.forEach(specs, (spec) =>
      Effect.suspend(() => {
        const existing = topics.get(spec.name)
        if (existing === undefined) {
          const logs = Array.from({ length: spec.partitions }, (): Log => ({ base: 0n, records: [], waiters: [] }))
          topics.set(spec.name, { spec, logs })
          return Effect.void
        }
        return existing.spec.partitions === spec.partitions ? Effect.void : Effect.fail(
          new BusError({
            message:
              `topic ${spec.name} has ${existing.spec.partitions} partitions, ${spec.partitions} are declared`
          })
        )
      }), { discard: true })

  /** Drops records every group has read and records past the topic's retention. */
  const trim = (name: string, topic: Topic, partition: number, log: Log, now: number) => {
    let keepFrom = log.base + BigInt(log.records.length)
    let grouped = false
    for (const group of groups.values()) {
      if (group.topic !== name) continue
      grouped = true
      const committed = group.committed.get(partition) ?? 0n
      if (committed < keepFrom) keepFrom = committed
    }
    if (!grouped) keepFrom = log.base
    let drop = Number(keepFrom - log.base)
    const cutoff = now - topic.spec.retentionMs
    while (drop < log.records.length && log.records[drop]!.at < cutoff) drop++
    if (drop > 0) {
      log.records = log.records.slice(drop)
      log.base += BigInt(drop)
    }
  }

  const append: MemoryBrokerShape["append"] = (name, partition, key, value, headers) =>
    Effect.gen(function*() {
      const topic = yield* topicOf(name)
      const log = topic.logs[partition]
      if (log === undefined) {
        return yield* new BusError({ message: `topic ${name} has no partition ${partition}` })
      }
      // A copy through JSON, as over the wire: nothing shared, nothing that would not serialise.
      const copy = yield* Effect.try({
        try: () => JSON.parse(JSON.stringify(value)) as unknown,
        catch: (cause) => new BusError({ message: "the message is not JSON", cause })
      })
      const now = yield* Clock.currentTimeMillis
      trim(name, topic, partition, log, now)
      const offset = log.base + BigInt(log.records.length)
      log.records.push({ topic: name, partition, offset, key, value: copy, headers: { ...headers }, at: now })
      const waiters = log.waiters
      log.waiters = []
      for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
    })

  const read: MemoryBrokerShape["read"] = (name, partition, from) =>
    Effect.gen(function*() {
      for (;;) {
        const log = topics.get(name)?.logs[partition]
        if (log === undefined) return yield* Effect.never
        const start = from < log.base ? 0 : Number(from - log.base)
        if (start < log.records.length) {
          return log.records.slice(start).map(({ at: _at, ...record }) => record)
        }
        const waiter = Deferred.makeUnsafe<void>()
        log.waiters.push(waiter)
        yield* Deferred.await(waiter)
      }
    })

  const groupOf = (group: string, topic: string): Group => {
    const key = groupKey(group, topic)
    let state = groups.get(key)
    if (state === undefined) {
      state = { topic, members: new Map(), assignment: new Map(), committed: new Map(), generation: 0 }
      groups.set(key, state)
    }
    return state
  }

  /** Revokes moved partitions from their live owners, then tells every member what it owns. */
  const rebalance = (state: Group) =>
    Effect.gen(function*() {
      const topic = yield* topicOf(state.topic).pipe(Effect.orDie)
      const next = assign(topic.spec.partitions, [...state.members.keys()], state.assignment)
      for (const member of state.members.values()) {
        const lost: Array<number> = []
        for (const [partition, owner] of state.assignment) {
          if (owner === member.nodeId && next.get(partition) !== owner) lost.push(partition)
        }
        if (lost.length > 0) yield* member.revoke(lost)
      }
      state.assignment = next
      state.generation += 1
      for (const member of state.members.values()) {
        const owned: Array<number> = []
        for (const [partition, owner] of next) if (owner === member.nodeId) owned.push(partition)
        yield* member.assigned(owned, state.generation)
      }
    })

  const join: MemoryBrokerShape["join"] = (group, topic, member) =>
    membership.withPermit(Effect.gen(function*() {
      yield* topicOf(topic)
      if (!nodes.has(member.nodeId)) {
        return yield* new BusError({ message: `node ${member.nodeId} is not registered or not alive` })
      }
      const state = groupOf(group, topic)
      state.members.set(member.nodeId, member)
      yield* rebalance(state)
    }))

  const leave: MemoryBrokerShape["leave"] = (group, topic, nodeId) =>
    membership.withPermit(Effect.gen(function*() {
      const state = groups.get(groupKey(group, topic))
      const member = state?.members.get(nodeId)
      if (state === undefined || member === undefined) return
      const owned = [...state.assignment].filter(([, owner]) => owner === nodeId).map(([partition]) => partition)
      yield* member.revoke(owned)
      state.members.delete(nodeId)
      for (const partition of owned) state.assignment.delete(partition)
      yield* rebalance(state)
    }))

  const kill: MemoryBrokerShape["kill"] = (nodeId) =>
    Effect.gen(function*() {
      // Dead at once: from here on its commits and replies are lost.
      nodes.delete(nodeId)
      yield* membership.withPermit(Effect.forEach(groups.values(), (state) => {
        if (!state.members.delete(nodeId)) return Effect.void
        for (const [partition, owner] of state.assignment) {
          if (owner === nodeId) state.assignment.delete(partition)
        }
        return rebalance(state)
      }, { discard: true }))
    })

  const commit: MemoryBrokerShape["commit"] = (group, topic, partition, nodeId, next) =>
    Effect.sync(() => {
      const state = groups.get(groupKey(group, topic))
      if (state === undefined || !nodes.has(nodeId) || state.assignment.get(partition) !== nodeId) return
      state.committed.set(partition, next)
    })

  return {
    ensureTopics,
    append,
    end: (name, partition) => {
      const log = topics.get(name)?.logs[partition]
      return log === undefined ? 0n : log.base + BigInt(log.records.length)
    },
    read,
    join,
    leave,
    committed: (group, topic, partition) => groups.get(groupKey(group, topic))?.committed.get(partition) ?? 0n,
    commit,
    register: (nodeId, onReply) =>
      Effect.suspend(() => {
        if (nodes.has(nodeId)) return Effect.fail(new BusError({ message: `node ${nodeId} is already running` }))
        nodes.set(nodeId, onReply)
        return Effect.void
      }),
    unregister: (nodeId, onReply) =>
      Effect.sync(() => {
        if (nodes.get(nodeId) === onReply) nodes.delete(nodeId)
      }),
    deliverReply: (replyTo, record) => Effect.suspend(() => nodes.get(replyTo)?.(record) ?? Effect.void),
    kill,
    isAlive: (nodeId) => nodes.has(nodeId),
    assignment: (group, topic) => new Map(groups.get(groupKey(group, topic))?.assignment)
  }
})

/** The broker shared by the nodes of one process. */
export class MemoryBroker extends Context.Service<MemoryBroker, MemoryBrokerShape>()("grove/bus/MemoryBroker") {
  static readonly make = make
  static readonly layer = Layer.effect(MemoryBroker, make)
}
