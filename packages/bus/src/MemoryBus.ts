/**
 * The embedded bus: one node on a `MemoryBroker`. Several `MemoryBus` nodes on
 * one broker behave like a cluster in one process (tests), one alone is the
 * embedded server's bus. Replies go straight to the requesting node.
 */
import { Duration, Effect, Layer, Stream } from "effect"
import { Bus, BusError, type BusShape, Headers, type PartitionClaim } from "./Bus.ts"
import * as BusStatus from "./BusStatus.ts"
import * as Committer from "./Committer.ts"
import { MemoryBroker } from "./MemoryBroker.ts"
import { partitionFor } from "./murmur2.ts"
import * as PartitionLag from "./PartitionLag.ts"
import * as PartitionWorkers from "./PartitionWorkers.ts"
import * as Replies from "./Replies.ts"
import * as Topics from "./Topics.ts"
import type { TopicSpec } from "./Topics.ts"

export interface MemoryBusOptions {
  readonly nodeId: string
  /** Defaults to the topics declared in `infra/topics.json`. */
  readonly topics?: ReadonlyArray<TopicSpec> | undefined
  /**
   * Offsets are committed in the background this often, and when a partition
   * is revoked (as Kafka consumers do), so a killed node loses its latest
   * commits and the survivors see redeliveries. Default 100 ms.
   */
  readonly commitInterval?: Duration.Input | undefined
}

export const make = Effect.fnUntraced(function*(options: MemoryBusOptions) {
  const broker = yield* MemoryBroker
  const nodeId = options.nodeId
  const topics = options.topics ?? Topics.all
  const commitInterval = options.commitInterval ?? Duration.millis(100)
  yield* broker.ensureTopics(topics)

  // The broker is in this process: always reachable.
  const tracker = BusStatus.make()
  const replies = yield* Replies.make(nodeId)
  yield* Effect.acquireRelease(
    broker.register(nodeId, replies.complete),
    () => broker.unregister(nodeId, replies.complete)
  )

  const partitionsOf = (topic: string) => {
    const spec = Topics.find(topics, topic)
    return spec === undefined
      ? Effect.fail(new BusError({ message: `topic ${topic} is not declared` }))
      : Effect.succeed(spec.partitions)
  }

  const partitionForTopic = (topic: string, key: string) => {
    const spec = Topics.find(topics, topic)
    return spec === undefined ? 0 : partitionFor(key, spec.partitions)
  }

  const publish: BusShape["publish"] = (records) =>
    Effect.forEach(records, (record) =>
      Effect.flatMap(
        partitionsOf(record.topic),
        (partitions) =>
          broker.append(record.topic, partitionFor(record.key, partitions), record.key, record.value, record.headers ?? {})
      ), { discard: true })

  const claim = (
    group: string,
    topic: string,
    partition: number,
    generation: number,
    committer: Committer.Committer<void>,
    lag: PartitionLag.GroupLag
  ): PartitionClaim => ({
    topic,
    partition,
    generation,
    records: Stream.suspend(() => {
      let next = broker.committed(group, topic, partition)
      return Stream.fromEffectRepeat(
        Effect.suspend(() => broker.read(topic, partition, next)).pipe(
          Effect.map((records) => {
            next = records[records.length - 1]!.offset + 1n
            return records
          })
        )
      ).pipe(Stream.flattenIterable)
    }),
    commit: (offset) =>
      Effect.sync(() => {
        committer.mark(partition, offset + 1n, undefined)
        lag.processed(partition, offset + 1n)
      }),
    owned: Effect.sync(() => broker.isAlive(nodeId) && broker.assignment(group, topic).get(partition) === nodeId)
  })

  const consume = <R>(
    group: string,
    topic: string,
    onPartition: (claim: PartitionClaim) => Effect.Effect<void, never, R>
  ) =>
    Effect.gen(function*() {
      yield* partitionsOf(topic)
      const context = yield* Effect.context<R>()
      const committer = yield* Committer.make<void>(
        (marks) =>
          Effect.forEach(marks, (mark) => broker.commit(group, topic, mark.partition, nodeId, mark.next), {
            discard: true
          }),
        commitInterval
      )
      // The broker is in this process: a partition's end is its log's.
      const lag = PartitionLag.make(group, topic, (partitions) =>
        Effect.sync(() => new Map(partitions.map((partition) => [partition, broker.end(topic, partition)]))))
      yield* tracker.lag.add(lag)
      const workers = yield* PartitionWorkers.make((partition, generation) =>
        Effect.sync(() => {
          lag.started(partition, broker.committed(group, topic, partition))
          return onPartition(claim(group, topic, partition, generation, committer, lag)).pipe(
            Effect.provideContext(context),
            Effect.ensuring(Effect.sync(() => lag.stopped(partition)))
          )
        })
      )
      const revoke = (partitions: ReadonlyArray<number>) =>
        workers.revoke(partitions).pipe(Effect.andThen(committer.flush(partitions)))
      const membership = tracker.group(group, topic)
      const assigned = (partitions: ReadonlyArray<number>, generation: number) =>
        Effect.sync(() => membership.joined(generation, partitions)).pipe(Effect.andThen(workers.sync(partitions, generation)))
      yield* Effect.acquireRelease(
        broker.join(group, topic, { nodeId, assigned, revoke }),
        // A killed node leaves nothing behind gracefully: its scope just closes.
        () =>
          Effect.sync(membership.remove).pipe(
            Effect.andThen(broker.isAlive(nodeId) ? broker.leave(group, topic, nodeId) : Effect.void)
          )
      )
    })

  const request = Replies.request(replies, publish)

  const reply: BusShape["reply"] = (request, value) =>
    Effect.gen(function*() {
      const route = Replies.replyRoute(request)
      if (route === undefined) return
      const copy = yield* Effect.try({
        try: () => JSON.parse(JSON.stringify(value)) as unknown,
        catch: (cause) => new BusError({ message: "the reply is not JSON", cause })
      })
      yield* broker.deliverReply(route.replyTo, {
        topic: Topics.replies,
        partition: partitionForTopic(Topics.replies, route.replyTo),
        offset: -1n,
        key: route.replyTo,
        value: copy,
        headers: { [Headers.correlationId]: route.correlationId }
      })
    })

  const tail: BusShape["tail"] = (topic, onRecord) =>
    Effect.gen(function*() {
      const partitions = yield* partitionsOf(topic)
      for (let partition = 0; partition < partitions; partition++) {
        let next = broker.end(topic, partition)
        yield* Effect.forkScoped(
          Effect.suspend(() => broker.read(topic, partition, next)).pipe(
            Effect.flatMap((records) => {
              next = records[records.length - 1]!.offset + 1n
              return Effect.forEach(records, onRecord, { discard: true })
            }),
            Effect.forever
          )
        )
      }
    })

  return Bus.of({ nodeId, topics, partitionFor: partitionForTopic, publish, consume, request, reply, tail, status: tracker.status, lag: tracker.lag.read })
})

/** A node on the process's shared `MemoryBroker`. */
export const layer = (options: MemoryBusOptions): Layer.Layer<Bus, BusError, MemoryBroker> =>
  Layer.effect(Bus, make(options))

/** The embedded server's bus: one node with a broker of its own. */
export const layerEmbedded = (options: { readonly nodeId?: string | undefined } = {}): Layer.Layer<Bus, BusError> =>
  layer({ nodeId: options.nodeId ?? "embedded" }).pipe(Layer.provide(MemoryBroker.layer))
