/**
 * Reading a whole topic from its end on one node: a consumer group of this process alone (so no
 * other node or process splits the records with it) that commits nothing. Used for the replies to
 * this node's requests and for node-local reactions to events (clearing caches). Records are read
 * while the scope is open; a failed stream is reopened after 500 ms, from the end again (what was
 * published meanwhile is missed: the callers' own time limits cover it).
 */
import { Consumer, type Message, MessagesStreamModes, stringDeserializers } from "@platformatic/kafka"
import { Deferred, Duration, Effect, Stream } from "effect"
import { randomUUID } from "node:crypto"
import { BusError, type BusRecord } from "./Bus.ts"
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
  }
) {
  const consumer = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Consumer<string, string, string, string>({
        // Unique per process: two processes under one node id must not split the records between them.
        groupId: `${options.prefix}${topic}.${reader.name}.${randomUUID()}`,
        clientId: reader.name,
        bootstrapBrokers: [...options.bootstrap],
        autocommit: false,
        sessionTimeout: Duration.toMillis(options.sessionTimeout),
        heartbeatInterval: Duration.toMillis(options.heartbeatInterval),
        deserializers: stringDeserializers,
        maxWaitTime: 500
      })
    ),
    (consumer) => Effect.promise(() => consumer.close(true)).pipe(Effect.ignore)
  )
  const positioned = yield* Deferred.make<void>()
  const open = Effect.tryPromise({
    try: () => consumer.consume({ topics: [options.prefix + topic], mode: MessagesStreamModes.LATEST, autocommit: false }),
    catch: kafkaError(`could not read the topic ${topic}`)
  }).pipe(
    // Positioned once the stream knows where the topic ends.
    Effect.tap((stream) => Effect.sync(() => stream.once("offsets", () => Deferred.doneUnsafe(positioned, Effect.void))))
  )
  const filter = reader.filter ?? (() => true)
  const pump = (stream: Effect.Success<typeof open>) =>
    Stream.fromAsyncIterable(stream, kafkaError(`the stream of ${topic} failed`)).pipe(
      Stream.filter(filter),
      Stream.runForEach((message) => reader.onRecord(toRecord(topic, message))),
      Effect.catch((error) => Effect.logWarning(`the stream of ${topic} ended; reopening`, error)),
      Effect.ensuring(Effect.promise(() => stream.close()).pipe(Effect.ignore))
    )
  const first = yield* open
  const reopen = Effect.sleep(500).pipe(
    Effect.andThen(open),
    Effect.flatMap(pump),
    Effect.catch((error) => Effect.logWarning(`could not reopen the stream of ${topic}`, error))
  )
  yield* Effect.forkScoped(pump(first).pipe(Effect.andThen(Effect.forever(reopen))))
  yield* Deferred.await(positioned).pipe(
    Effect.timeoutOrElse({
      duration: Duration.seconds(60),
      orElse: () => Effect.fail(new BusError({ message: `the reader of ${topic} did not start` }))
    })
  )
})
