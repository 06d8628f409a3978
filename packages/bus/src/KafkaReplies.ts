/**
 * The replies side of request/reply on Kafka: every node reads the whole
 * replies topic from its end, in a consumer group of its own process that
 * commits nothing, and hands the replies keyed with its node id to the
 * waiting requests. Replies are small and short-lived, so reading all of them
 * costs little at Grove's cluster sizes and needs no per-node topics to
 * create and clean up. (`@platformatic/kafka` gives a lone group member every
 * partition, so reading only the node's own partition would take a
 * hand-written fetch loop.)
 */
import { Consumer, MessagesStreamModes, stringDeserializers } from "@platformatic/kafka"
import { Deferred, Duration, Effect, Stream } from "effect"
import { randomUUID } from "node:crypto"
import { BusError } from "./Bus.ts"
import { type GroupOptions, kafkaError, toRecord } from "./KafkaPartitions.ts"
import type { Replies } from "./Replies.ts"
import * as Topics from "./Topics.ts"

/** Reads replies for `nodeId` until the scope closes; returns once replies to new requests will be seen. */
export const read = Effect.fnUntraced(function*(options: GroupOptions, nodeId: string, replies: Replies) {
  const consumer = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Consumer<string, string, string, string>({
        // Unique per process: two processes under one node id must not split the replies between them.
        groupId: `${options.prefix}${Topics.replies}.${nodeId}.${randomUUID()}`,
        clientId: `${nodeId}-replies`,
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
    try: () =>
      consumer.consume({ topics: [options.prefix + Topics.replies], mode: MessagesStreamModes.LATEST, autocommit: false }),
    catch: kafkaError("could not read the replies topic")
  }).pipe(
    // Positioned once the stream knows where the topic ends.
    Effect.tap((stream) => Effect.sync(() => stream.once("offsets", () => Deferred.doneUnsafe(positioned, Effect.void))))
  )
  const pump = (stream: Effect.Success<typeof open>) =>
    Stream.fromAsyncIterable(stream, kafkaError("the replies stream failed")).pipe(
      Stream.filter((message) => message.key === nodeId),
      Stream.runForEach((message) => replies.complete(toRecord(Topics.replies, message))),
      Effect.catch((error) => Effect.logWarning("replies stream ended; reopening", error)),
      Effect.ensuring(Effect.promise(() => stream.close()).pipe(Effect.ignore))
    )
  const first = yield* open
  // Replies sent while the stream is reopened are lost: their requests time out.
  const reopen = Effect.sleep(500).pipe(
    Effect.andThen(open),
    Effect.flatMap(pump),
    Effect.catch((error) => Effect.logWarning("could not reopen the replies stream", error))
  )
  yield* Effect.forkScoped(pump(first).pipe(Effect.andThen(Effect.forever(reopen))))
  yield* Deferred.await(positioned).pipe(
    Effect.timeoutOrElse({
      duration: Duration.seconds(60),
      orElse: () => Effect.fail(new BusError({ message: "the replies consumer did not start" }))
    })
  )
})
