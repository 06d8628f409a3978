/**
 * The cluster bus on Apache Kafka (`@platformatic/kafka`).
 *
 * Choices:
 * - One idempotent producer per node (acks from all in-sync replicas, no
 *   duplicates or reordering on retries). Records go to the partition our
 *   murmur2 computes, the same as Kafka's default partitioner; the producer is
 *   also configured with `compatibilityPartitioner` so the two never differ.
 * - Topics are created at start from `infra/topics.json` when missing; a topic
 *   with another partition count stops the node (keys would move).
 * - Replies: `grove.replies`, keyed by the requesting node's id. Every node
 *   reads the whole topic (from its end, in a throwaway group of its own
 *   process, committing nothing) and keeps the replies keyed with its id. Replies are
 *   small and short-lived, so reading all of them costs little at Grove's
 *   cluster sizes and needs no per-node topics to create and clean up.
 *   (`@platformatic/kafka` hands a lone group member every partition, so
 *   reading only the node's own partition would take a hand-written fetch loop.)
 * - `consume`: see `KafkaPartitions`.
 */
import { compatibilityPartitioner, Admin, Consumer, MessagesStreamModes, Producer, stringDeserializers, stringSerializers } from "@platformatic/kafka"
import { Deferred, Duration, Effect, Layer, Stream } from "effect"
import { randomUUID } from "node:crypto"
import { Bus, BusError, type BusShape, Headers, type OutgoingRecord, type PartitionClaim } from "./Bus.ts"
import * as KafkaPartitions from "./KafkaPartitions.ts"
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
}

const kafkaError = KafkaPartitions.kafkaError

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
  const metadata = yield* Effect.tryPromise({
    try: () => admin.metadata({ topics: topics.map((spec) => spec.name), forceUpdate: true }),
    catch: kafkaError("could not read the topics' metadata")
  })
  for (const spec of topics) {
    const found = metadata.topics.get(spec.name)?.partitionsCount
    if (found !== spec.partitions) {
      return yield* new BusError({
        message: `topic ${spec.name} has ${found ?? "no"} partitions, ${spec.partitions} are declared`
      })
    }
  }
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
    commitInterval: Duration.fromInputUnsafe(options.commitInterval ?? Duration.millis(200))
  }

  yield* ensureTopics(
    { bootstrap, clientId: nodeId, replicationFactor: options.replicationFactor },
    topics.map((spec) => new Topics.TopicSpec({ ...spec, name: prefix + spec.name }))
  )

  const producer = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Producer<string, string, string, string>({
        clientId: nodeId,
        bootstrapBrokers: [...bootstrap],
        idempotent: true,
        acks: -1,
        partitioner: compatibilityPartitioner,
        serializers: stringSerializers
      })
    ),
    (producer) => Effect.promise(() => producer.close()).pipe(Effect.ignore)
  )

  const partitionsOf = (topic: string) => Topics.find(topics, topic)?.partitions

  const partitionForTopic = (topic: string, key: string) => {
    const partitions = partitionsOf(topic)
    return partitions === undefined ? 0 : partitionFor(key, partitions)
  }

  const send = (records: ReadonlyArray<OutgoingRecord & { readonly partition: number }>) =>
    Effect.tryPromise({
      try: () =>
        producer.send({
          messages: records.map((record) => ({
            topic: prefix + record.topic,
            key: record.key,
            value: JSON.stringify(record.value),
            partition: record.partition,
            headers: { ...record.headers }
          }))
        }),
      catch: kafkaError("could not publish")
    }).pipe(Effect.asVoid)

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

  // Replies: read the whole replies topic from its end, keep those addressed here.
  const replies = yield* Replies.make(nodeId)
  const replyConsumer = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Consumer<string, string, string, string>({
        // Unique per process: two processes under one node id must not split the replies between them.
        groupId: `${prefix}${Topics.replies}.${nodeId}.${randomUUID()}`,
        clientId: `${nodeId}-replies`,
        bootstrapBrokers: [...bootstrap],
        autocommit: false,
        sessionTimeout: Duration.toMillis(group.sessionTimeout),
        heartbeatInterval: Duration.toMillis(group.heartbeatInterval),
        deserializers: stringDeserializers,
        maxWaitTime: 500
      })
    ),
    (consumer) => Effect.promise(() => consumer.close(true)).pipe(Effect.ignore)
  )
  const replyStream = yield* Effect.tryPromise({
    try: () =>
      replyConsumer.consume({ topics: [prefix + Topics.replies], mode: MessagesStreamModes.LATEST, autocommit: false }),
    catch: kafkaError("could not read the replies topic")
  })
  // Ready once the stream knows where the topic ends: replies to requests sent after this are seen.
  const positioned = yield* Deferred.make<void>()
  replyStream.once("offsets", () => Deferred.doneUnsafe(positioned, Effect.void))
  yield* Effect.forkScoped(
    Stream.fromAsyncIterable(replyStream, kafkaError("the replies stream failed")).pipe(
      Stream.filter((message) => message.key === nodeId),
      Stream.runForEach((message) => replies.complete(KafkaPartitions.toRecord(Topics.replies, message))),
      Effect.catch((error) => Effect.logError("replies stream ended", error))
    )
  )
  yield* Deferred.await(positioned).pipe(
    Effect.timeoutOrElse({
      duration: Duration.seconds(60),
      orElse: () => Effect.fail(new BusError({ message: "the replies consumer did not start" }))
    })
  )

  const consume = <R>(
    groupId: string,
    topic: string,
    onPartition: (claim: PartitionClaim) => Effect.Effect<void, never, R>
  ) =>
    partitionsOf(topic) === undefined
      ? Effect.fail(new BusError({ message: `topic ${topic} is not declared` }))
      : KafkaPartitions.consume(group, groupId, topic, onPartition)

  const request: BusShape["request"] = (record, timeout) =>
    Effect.gen(function*() {
      const registration = yield* replies.register(timeout)
      yield* publish([{ ...record, headers: { ...record.headers, ...registration.headers } }]).pipe(
        Effect.onError(() => registration.cancel)
      )
      return registration.pending
    })

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

  return Bus.of({ nodeId, topics, partitionFor: partitionForTopic, publish, consume, request, reply })
})

export const layer = (options: KafkaBusOptions): Layer.Layer<Bus, BusError> => Layer.effect(Bus, make(options))
