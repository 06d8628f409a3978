/**
 * The message bus: declared topics with fixed partition counts, keyed
 * produce, consumption of the partitions this node owns in a consumer group
 * (one fiber per owned partition) and request/reply. `MemoryBus` (embedded,
 * and several simulated nodes in one process) and `KafkaBus` (cluster)
 * implement it and pass one contract suite.
 *
 * Messages are JSON objects with `type` and `v` (schema version), so an
 * operator can read any topic with `kcat -C -t grove.events`.
 */
import { Context, type Duration, type Effect, Schema, type Scope, type Stream } from "effect"
import type { BusStatus } from "./BusStatus.ts"
import type { PartitionLag } from "./PartitionLag.ts"
import type { TopicSpec } from "./Topics.ts"

/** A message as written to a topic. Anything else in it is the message's own data. */
export interface BusMessage {
  readonly type: string
  readonly v: number
  readonly [field: string]: unknown
}

/** A record read from a topic. `value` is the parsed JSON (the raw text if it was not JSON). */
export interface BusRecord {
  readonly topic: string
  readonly partition: number
  readonly offset: bigint
  readonly key: string
  readonly value: unknown
  readonly headers: Readonly<Record<string, string>>
}

export interface OutgoingRecord {
  readonly topic: string
  readonly key: string
  readonly value: BusMessage
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/**
 * One partition this node owns, handed to the `onPartition` callback of
 * `consume` in its own fiber. The fiber is interrupted when the partition is
 * revoked. A callback that returns by itself should do so only once `owned`
 * says the partition is no longer this node's, or once its node stops: a
 * partition it leaves stays idle on this node until the group's next
 * rebalance hands it out again.
 */
export interface PartitionClaim {
  readonly topic: string
  readonly partition: number
  /** The group generation in which this node was given the partition. */
  readonly generation: number
  /** The partition's records in offset order, from the group's committed offset on. Never ends. */
  readonly records: Stream.Stream<BusRecord>
  /**
   * Marks every record up to `offset` as processed. Asynchronous: the group's
   * committed offset is only a lower bound for redelivery after a rebalance,
   * the database holds the authoritative one.
   */
  readonly commit: (offset: bigint) => Effect.Effect<void>
  /**
   * Reads the group's assignment afresh: whether the partition is (still) this
   * node's, as the group's latest generation known here says. False once this
   * node has left or lost its group membership.
   */
  readonly owned: Effect.Effect<boolean>
}

export interface PendingReply {
  readonly correlationId: string
  /** Waits for the reply until the request's deadline. */
  readonly await: Effect.Effect<BusRecord, RequestTimeout>
}

export class BusError extends Schema.TaggedError<BusError>()("BusError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", {
  correlationId: Schema.String
}) {}

/** Header names of request/reply (Kafka record headers; plain strings). */
export const Headers = {
  correlationId: "correlation-id",
  replyTo: "reply-to",
  /** Epoch milliseconds after which the requester no longer waits. */
  deadline: "deadline"
} as const

export interface BusShape {
  /** This node's id; replies to its requests are addressed to it. */
  readonly nodeId: string
  readonly topics: ReadonlyArray<TopicSpec>
  /** The partition `key` goes to in `topic` (murmur2, as Kafka's default partitioner). */
  readonly partitionFor: (topic: string, key: string) => number
  /** Produces the records in order and waits until the bus has them. */
  readonly publish: (records: ReadonlyArray<OutgoingRecord>) => Effect.Effect<void, BusError>
  /**
   * Joins `group` on `topic` until the scope closes: for every partition the
   * group assigns to this node, `onPartition` runs in its own fiber. Returns
   * once the node has joined.
   */
  readonly consume: <R>(
    group: string,
    topic: string,
    onPartition: (claim: PartitionClaim) => Effect.Effect<void, never, R>
  ) => Effect.Effect<void, BusError, Scope.Scope | R>
  /**
   * Publishes a request carrying a correlation id, this node as reply-to and a
   * deadline, and returns a handle to await its reply. The request is on the
   * bus when this succeeds.
   */
  readonly request: (record: OutgoingRecord, timeout: Duration.Input) => Effect.Effect<PendingReply, BusError>
  /** Sends `value` back to the node that made `request`. */
  readonly reply: (request: BusRecord, value: BusMessage) => Effect.Effect<void, BusError>
  /**
   * Reads every record published to `topic` from now on, on this node alone (no group shares them
   * out, nothing is committed), until the scope closes: for node-local reactions to events, such as
   * clearing caches. Returns once records published after it returns will be seen.
   */
  /** Whether the broker answers and, per group this node consumes, its membership and assignment (for health). */
  readonly status: () => BusStatus
  /** Per partition of every group this node consumes: records its worker has not processed yet (asks the broker). */
  readonly lag: Effect.Effect<ReadonlyArray<PartitionLag>>
  readonly tail: <R>(
    topic: string,
    onRecord: (record: BusRecord) => Effect.Effect<void, never, R>
  ) => Effect.Effect<void, BusError, Scope.Scope | R>
}

export class Bus extends Context.Service<Bus, BusShape>()("grove/bus/Bus") {}
