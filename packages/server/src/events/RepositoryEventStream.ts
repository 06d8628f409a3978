/**
 * This node's live feed of repository events: one tail of `grove.events` (not one per client),
 * published to every subscriber — the `…/events` stream of each connected client. A subscriber
 * that falls 1,000 events behind loses the oldest (the stream is a wake-up signal, not a log); each
 * item carries this node's sequence number, so a subscriber sees the gap and can tell its client.
 *
 * Access events (`ACCESS_EVENT_TYPES`: a key revoked, a membership or a visibility changed, ...) are
 * in the feed too, in the topic's order, after this node's access caches are cleared: each stream
 * re-checks its caller's access there, before any event that followed the change. Every node
 * tails the topic, so a change made through any node closes the streams it concerns on all of them.
 */
import { Bus, Topics } from "@grove/bus"
import { Context, Effect, Layer, PubSub } from "effect"
import { AccessCaches } from "../cache/AccessCaches.ts"
import { isAccessEvent } from "../cache/AccessCaches.ts"
import { DEFAULT_RECHECK_MS, DEFAULT_STREAM_LIMITS, ServerConfig } from "../Config.ts"
import { type RepositoryEvent, repositoryEventOf } from "./RepositoryEvent.ts"
import { StreamSlots } from "./StreamSlots.ts"

/** An item as this node published it: `seq` counts every item, so a gap means some were dropped. */
export type SequencedEvent =
  | { readonly seq: number; readonly event: RepositoryEvent }
  /** An access event: its type. */
  | { readonly seq: number; readonly access: string }

export class RepositoryEventStream extends Context.Service<RepositoryEventStream, {
  readonly pubsub: PubSub.PubSub<SequencedEvent>
  /** The open streams, capped per caller and per node. */
  readonly slots: StreamSlots
  readonly recheckMs: number
}>()("grove/server/events/RepositoryEventStream") {
  static readonly layer = Layer.effect(RepositoryEventStream, Effect.gen(function*() {
    const bus = yield* Bus.Bus
    const caches = yield* AccessCaches
    const config = yield* ServerConfig
    const pubsub = yield* PubSub.sliding<SequencedEvent>(1000)
    let seq = 0
    yield* bus.tail(Topics.events, (record) => {
      if (isAccessEvent(record.value)) {
        // Cleared before the streams re-check, whichever of this tail and the caches' follower runs first.
        caches.invalidateAll()
        const access = String((record.value as { type: unknown }).type)
        return PubSub.publish(pubsub, { seq: ++seq, access }).pipe(Effect.asVoid)
      }
      const event = repositoryEventOf(record.value)
      return event === undefined ? Effect.void : PubSub.publish(pubsub, { seq: ++seq, event }).pipe(Effect.asVoid)
    }).pipe(Effect.catch((error) => Effect.logWarning("not following repository events; event streams stay silent", error)))
    const slots = new StreamSlots({
      perCaller: config.eventStreamsPerCaller ?? DEFAULT_STREAM_LIMITS.perCaller,
      perNode: config.eventStreamsPerNode ?? DEFAULT_STREAM_LIMITS.perNode
    })
    return RepositoryEventStream.of({ pubsub, slots, recheckMs: config.eventStreamRecheckMs ?? DEFAULT_RECHECK_MS })
  }))
}
