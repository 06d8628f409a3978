/**
 * The cluster bus on Apache Kafka (`@platformatic/kafka`).
 *
 * Choices:
 * - One idempotent producer per node (acks from all in-sync replicas, no
 *   duplicates or reordering on retries), replaced by a new one when a send
 *   fails or is not acknowledged within 10 s (after a broker restart one was
 *   seen to hang on every send while metadata requests still answered). Records go to the partition our
 *   murmur2 computes, the same as Kafka's default partitioner; the producer is
 *   also configured with `compatibilityPartitioner` so the two never differ.
 * - Topics are created at start from `infra/topics.json` when missing; a topic
 *   with another partition count stops the node (keys would move).
 * - Replies: `grove.replies`, keyed by the requesting node's id (see `KafkaReplies`).
 * - `consume`: see `KafkaPartitions` (and `KafkaMember`: a lost membership is
 *   joined again, forever, with a capped backoff).
 * - Reachability (`status`): the producer asks the broker for metadata every
 *   second; a failed probe or publish marks the bus unreachable until one
 *   succeeds, so writes fail fast (503) instead of waiting for a reply.
 */
import { Admin, compatibilityPartitioner, Producer, stringSerializers } from "@platformatic/kafka"
import { Data, Duration, Effect, Layer, Schedule } from "effect"
import { Bus, BusError, type BusShape, Headers, type OutgoingRecord, type PartitionClaim } from "./Bus.ts"
import * as BusStatus from "./BusStatus.ts"
import * as KafkaMember from "./KafkaMember.ts"
import * as KafkaPartitions from "./KafkaPartitions.ts"
import * as KafkaReplies from "./KafkaReplies.ts"
import * as KafkaTail from "./KafkaTail.ts"
import { partitionFor } from "./murmur2.ts"
import * as Replies from "./Replies.ts"
import * as Topics from "./Topics.ts"
import type { TopicSpec } from "./Topics.ts"

export interface KafkaBusOptions {
  readonly nodeId: string
  /** `host:port` of one or more brokers. */
  readonly bootstrap: string | ReadonlyArray<string>
  /** Defaults to the topics declared in `infra/topics.json`. */
  readonly topics?: ReadonlyArray<TopicSpec> | undefined
  /**
   * Prepended to every topic and consumer group name on the broker, so
   * several deployments (or test suites) can share one Kafka. Records and
   * claims still carry the declared names. Default none.
   */
  readonly prefix?: string | undefined
  /** Replicas of topics this node creates; default the broker's `default.replication.factor`. */
  readonly replicationFactor?: number | undefined
  /** A crashed node's partitions move after this long. Default 10 seconds. */
  readonly sessionTimeout?: Duration.Input | undefined
  /** Default a third of the session timeout (at most 3 seconds). */
  readonly heartbeatInterval?: Duration.Input | undefined
  /** How long members may take to rejoin during a rebalance. Default 30 seconds. */
  readonly rebalanceTimeout?: Duration.Input | undefined
  /** Background offset commits. Default 200 ms. */
  readonly commitInterval?: Duration.Input | undefined
  /** On a graceful stop, how long the partition workers may take to finish the record in hand. Default 5 seconds. */
  readonly drainTimeout?: Duration.Input | undefined
}

const kafkaError = KafkaPartitions.kafkaError

/** How often, and how patiently, the broker's reachability is checked; more often while it is down (its return wakes the rejoins). */
const PROBE_EVERY = Duration.seconds(1)
const PROBE_WHILE_DOWN = Duration.millis(250)
const PROBE_TIMEOUT = Duration.seconds(3)
/** A send the broker has not acknowledged within this long failed (and its producer is replaced). */
const SEND_TIMEOUT = Duration.seconds(10)

class PartitionCountMismatch extends Data.TaggedError("PartitionCountMismatch")<{
  readonly topic: string
  readonly found: number
  readonly declared: number
}> {}

/** Creates the missing topics and checks the partition counts of the others. */
export const ensureTopics = Effect.fnUntraced(function*(
  options: { readonly bootstrap: ReadonlyArray<string>; readonly clientId: string; readonly replicationFactor?: number | undefined },
  topics: ReadonlyArray<TopicSpec>
) {
  const admin = yield* Effect.acquireRelease(
    Effect.sync(() => new Admin({ clientId: `${options.clientId}-admin`, bootstrapBrokers: [...options.bootstrap] })),
    (admin) => Effect.promise(() => admin.close()).pipe(Effect.ignore)
  )
  const existing = new Set(yield* Effect.tryPromise({
    try: () => admin.listTopics(),
    catch: kafkaError("could not list the topics")
  }))
  for (const spec of topics) {
    if (existing.has(spec.name)) continue
    yield* Effect.tryPromise({
      try: () =>
        admin.createTopics({
          topics: [spec.name],
          partitions: spec.partitions,
          replicas: options.replicationFactor ?? -1,
          configs: [{ name: "retention.ms", value: String(spec.retentionMs) }]
        }),
      catch: kafkaError(`could not create topic ${spec.name}`)
    }).pipe(
      // Another node may have created it in the meantime; the check below decides.
      Effect.catch((error) => Effect.logDebug("create topic", error))
    )
  }
  const check = Effect.gen(function*() {
    const metadata = yield* Effect.tryPromise({
      try: () => admin.metadata({ topics: topics.map((spec) => spec.name), forceUpdate: true }),
      catch: kafkaError("could not read the topics' metadata")
    })
    for (const spec of topics) {
      const found = metadata.topics.get(spec.name)?.partitionsCount
      if (found === undefined) return yield* new BusError({ message: `topic ${spec.name} does not exist` })
      if (found !== spec.partitions) {
        return yield* new PartitionCountMismatch({ topic: spec.name, found, declared: spec.partitions })
      }
    }
  })
  // A topic just created may take a moment to show in the metadata; a wrong partition count stays wrong.
  yield* check.pipe(
    Effect.retry({ times: 20, schedule: Schedule.spaced("250 millis"), while: (error) => error._tag === "BusError" }),
    Effect.mapError((error) =>
      error._tag === "BusError" ? error : new BusError({
        message: `topic ${error.topic} has ${error.found} partitions, ${error.declared} are declared`
      })
    )
  )
}, Effect.scoped)


export const make = Effect.fnUntraced(function*(options: KafkaBusOptions) {
  const nodeId = options.nodeId
  const topics = options.topics ?? Topics.all
  const prefix = options.prefix ?? ""
  const bootstrap = typeof options.bootstrap === "string" ? options.bootstrap.split(",") : options.bootstrap
  const sessionTimeout = Duration.fromInputUnsafe(options.sessionTimeout ?? Duration.seconds(10))
  const group: KafkaPartitions.GroupOptions = {
    bootstrap,
    prefix,
    clientId: nodeId,
    sessionTimeout,
    heartbeatInterval: Duration.fromInputUnsafe(
      options.heartbeatInterval ?? Duration.min(Duration.divideUnsafe(sessionTimeout, 3), Duration.seconds(3))
    ),
    rebalanceTimeout: Duration.fromInputUnsafe(options.rebalanceTimeout ?? Duration.seconds(30)),
    commitInterval: Duration.fromInputUnsafe(options.commitInterval ?? Duration.millis(200)),
    drainTimeout: options.drainTimeout === undefined ? undefined : Duration.fromInputUnsafe(options.drainTimeout)
  }

  yield* ensureTopics(
    { bootstrap, clientId: nodeId, replicationFactor: options.replicationFactor },
    topics.map((spec) => new Topics.TopicSpec({ ...spec, name: prefix + spec.name }))
  )

  const makeProducer = () =>
    new Producer<string, string, string, string>({
      clientId: nodeId,
      bootstrapBrokers: [...bootstrap],
      idempotent: true,
      acks: -1,
      partitioner: compatibilityPartitioner,
      serializers: stringSerializers,
      ...KafkaMember.clientTimeouts
    })
  const closeProducer = (closing: Producer<string, string, string, string>) =>
    Effect.promise(() => closing.close()).pipe(Effect.timeout("3 seconds"), Effect.ignore)
  let producer = makeProducer()
  yield* Effect.addFinalizer(() => closeProducer(producer))
  /**
   * A producer whose send failed or hung is replaced by a new one: after a broker restart an idempotent
   * producer was seen to hang on every send for good while metadata requests still answered.
   */
  const replaceProducer = (failed: Producer<string, string, string, string>, why: string) =>
    Effect.suspend(() => {
      if (producer !== failed) return Effect.void
      producer = makeProducer()
      return Effect.logWarning("replaced the Kafka producer after a failed send", { why }).pipe(
        Effect.andThen(Effect.forkDetach(closeProducer(failed))),
        Effect.asVoid
      )
    })

  const tracker = BusStatus.make()
  const reachability = <A, E extends BusError>(effect: Effect.Effect<A, E>) =>
    effect.pipe(
      Effect.tap(() => Effect.sync(tracker.reachable)),
      Effect.tapError((error) => Effect.sync(() => tracker.unreachable(error.message)))
    )
  // A metadata round trip per second (4 while it is down): the broker answers, or the bus is down.
  yield* Effect.forkScoped(
    Effect.tryPromise({
      try: () => producer.metadata({ topics: [prefix + Topics.commands], forceUpdate: true }),
      catch: kafkaError("the broker does not answer")
    }).pipe(
      Effect.timeoutOrElse({
        duration: PROBE_TIMEOUT,
        orElse: () => Effect.fail(new BusError({ message: "the broker does not answer" }))
      }),
      reachability,
      Effect.ignore,
      Effect.andThen(Effect.suspend(() => Effect.sleep(tracker.up() ? PROBE_EVERY : PROBE_WHILE_DOWN))),
      Effect.forever
    )
  )

  const partitionsOf = (topic: string) => Topics.find(topics, topic)?.partitions

  const partitionForTopic = (topic: string, key: string) => {
    const partitions = partitionsOf(topic)
    return partitions === undefined ? 0 : partitionFor(key, partitions)
  }

  const send = (records: ReadonlyArray<OutgoingRecord & { readonly partition: number }>) =>
    Effect.suspend(() => {
      const used = producer
      return Effect.tryPromise({
        try: () =>
          used.send({
            messages: records.map((record) => ({
              topic: prefix + record.topic,
              key: record.key,
              value: JSON.stringify(record.value),
              partition: record.partition,
              headers: { ...record.headers }
            }))
          }),
        catch: kafkaError("could not publish")
      }).pipe(
        Effect.timeoutOrElse({
          duration: SEND_TIMEOUT,
          orElse: () => Effect.fail(new BusError({ message: `the broker did not take the records within ${Duration.format(SEND_TIMEOUT)}` }))
        }),
        Effect.tapError((error) => replaceProducer(used, error.message)),
        Effect.asVoid,
        reachability
      )
    })

  const publish: BusShape["publish"] = (records) =>
    Effect.suspend(() => {
      const routed: Array<OutgoingRecord & { readonly partition: number }> = []
      for (const record of records) {
        const partitions = partitionsOf(record.topic)
        if (partitions === undefined) return Effect.fail(new BusError({ message: `topic ${record.topic} is not declared` }))
        routed.push({ ...record, partition: partitionFor(record.key, partitions) })
      }
      return routed.length === 0 ? Effect.void : send(routed)
    })

  const replies = yield* Replies.make(nodeId)
  yield* KafkaReplies.read(group, nodeId, replies, tracker)

  const consume = <R>(
    groupId: string,
    topic: string,
    onPartition: (claim: PartitionClaim) => Effect.Effect<void, never, R>
  ) =>
    partitionsOf(topic) === undefined
      ? Effect.fail(new BusError({ message: `topic ${topic} is not declared` }))
      : KafkaPartitions.consume(group, groupId, topic, onPartition, tracker)

  const request = Replies.request(replies, publish)

  const reply: BusShape["reply"] = (request, value) =>
    Effect.suspend(() => {
      const route = Replies.replyRoute(request)
      if (route === undefined) return Effect.void
      return send([{
        topic: Topics.replies,
        key: route.replyTo,
        value,
        partition: partitionForTopic(Topics.replies, route.replyTo),
        headers: { [Headers.correlationId]: route.correlationId }
      }])
    })

  const tail: BusShape["tail"] = (topic, onRecord) =>
    partitionsOf(topic) === undefined
      ? Effect.fail(new BusError({ message: `topic ${topic} is not declared` }))
      : KafkaTail.tail(group, topic, { name: `${nodeId}-tail`, onRecord, broker: tracker })

  return Bus.of({ nodeId, topics, partitionFor: partitionForTopic, publish, consume, request, reply, tail, status: tracker.status, lag: tracker.lag.read })
})

export const layer = (options: KafkaBusOptions): Layer.Layer<Bus, BusError> => Layer.effect(Bus, make(options))
