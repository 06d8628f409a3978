/**
 * This node's live feed of repository events: one tail of `grove.events` (not one per client),
 * published to every subscriber — the `…/events` stream of each connected client. A subscriber
 * that falls 1,000 events behind loses the oldest (the stream is a wake-up signal, not a log); each
 * event carries this node's sequence number, so a subscriber sees the gap and can tell its client.
 */
import { Bus, Topics } from "@grove/bus"
import { Context, Effect, Layer, PubSub } from "effect"
import { type RepositoryEvent, repositoryEventOf } from "./RepositoryEvent.ts"

/** An event as this node published it: `seq` counts every event, so a gap means some were dropped. */
export interface SequencedEvent {
  readonly seq: number
  readonly event: RepositoryEvent
}

export class RepositoryEventStream extends Context.Service<RepositoryEventStream, {
  readonly pubsub: PubSub.PubSub<SequencedEvent>
}>()("grove/server/events/RepositoryEventStream") {
  static readonly layer = Layer.effect(RepositoryEventStream, Effect.gen(function*() {
    const bus = yield* Bus.Bus
    const pubsub = yield* PubSub.sliding<SequencedEvent>(1000)
    let seq = 0
    yield* bus.tail(Topics.events, (record) => {
      const event = repositoryEventOf(record.value)
      return event === undefined ? Effect.void : PubSub.publish(pubsub, { seq: ++seq, event }).pipe(Effect.asVoid)
    }).pipe(Effect.catch((error) => Effect.logWarning("not following repository events; event streams stay silent", error)))
    return RepositoryEventStream.of({ pubsub })
  }))
}
