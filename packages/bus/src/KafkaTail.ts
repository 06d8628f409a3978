/**
 * Reading a whole topic from its end on one node: a consumer group of this process alone (so no
 * other node or process splits the records with it) that commits nothing. Used for the replies to
 * this node's requests and for node-local reactions to events (clearing caches). Records are read
 * while the scope is open; a failed stream or a lost membership means a new consumer (`KafkaMember`),
 * from the end again (what was published meanwhile is missed: the callers' own time limits cover it).
 */
import { Consumer, type Message, MessagesStreamModes, stringDeserializers } from "@platformatic/kafka"
import { Deferred, Duration, Effect, Stream } from "effect"
import { randomUUID } from "node:crypto"
import { BusError, type BusRecord } from "./Bus.ts"
import type * as BusStatus from "./BusStatus.ts"
import * as KafkaMember from "./KafkaMember.ts"
import { type GroupOptions, kafkaError, toRecord } from "./KafkaPartitions.ts"

type StringMessage = Message<string, string, string, string>

/** Reads `topic` until the scope closes; returns once records published after it returns will be seen. */
export const tail = Effect.fnUntraced(function*<R>(
  options: GroupOptions,
  topic: string,
  reader: {
    /** Names the group and the client: `<topic>.<name>.<uuid>`, `<name>`. */
    readonly name: string
    /** Records that fail it are skipped before they are decoded into a `BusRecord`. */
    readonly filter?: ((message: StringMessage) => boolean) | undefined
    readonly onRecord: (record: BusRecord) => Effect.Effect<void, never, R>
    /** The broker's reachability (see `KafkaMember.MemberOptions.broker`). */
    readonly broker: Pick<BusStatus.Tracker, "recovered" | "up">
  }
) {
  const context = yield* Effect.context<R>()
  const positioned = yield* Deferred.make<void>()
  const filter = reader.filter ?? (() => true)
  yield* KafkaMember.make<Consumer<string, string, string, string>>({
    name: `the reader of ${topic}`,
    create: () =>
      new Consumer<string, string, string, string>({
        // A group of this consumer alone: two processes under one node id must not split the records between
        // them, nor may a lost member whose close hangs keep (and drop) part of them after it was replaced.
        groupId: `${options.prefix}${topic}.${reader.name}.${randomUUID()}`,
        clientId: reader.name,
        bootstrapBrokers: [...options.bootstrap],
        autocommit: false,
        sessionTimeout: Duration.toMillis(options.sessionTimeout),
        heartbeatInterval: Duration.toMillis(options.heartbeatInterval),
        heartbeatStallTimeout: Duration.toMillis(options.sessionTimeout),
        deserializers: stringDeserializers,
        maxWaitTime: 500,
        ...KafkaMember.clientTimeouts
      }),
    open: (consumer) =>
      consumer.consume({ topics: [options.prefix + topic], mode: MessagesStreamModes.LATEST, autocommit: false }),
    joinTimeout: KafkaMember.joinTimeout(options),
    // Positioned once the stream knows where the topic ends.
    joined: (_, stream) => Effect.sync(() => stream.once("offsets", () => Deferred.doneUnsafe(positioned, Effect.void))),
    run: (_, stream) =>
      Stream.fromAsyncIterable(stream, kafkaError(`the stream of ${topic} failed`)).pipe(
        Stream.filter(filter),
        Stream.runForEach((message) => reader.onRecord(toRecord(topic, message))),
        Effect.as(`the stream of ${topic} ended`),
        Effect.catch((error) => Effect.succeed(`the stream of ${topic} failed: ${error.message}`)),
        Effect.ensuring(KafkaMember.closeStream(stream)),
        Effect.provideContext(context)
      ),
    lost: () => Effect.void,
    broker: reader.broker
  })
  yield* Deferred.await(positioned).pipe(
    Effect.timeoutOrElse({
      duration: Duration.seconds(60),
      orElse: () => Effect.fail(new BusError({ message: `the reader of ${topic} did not start` }))
    })
  )
})
