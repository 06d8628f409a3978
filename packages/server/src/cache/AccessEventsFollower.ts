/**
 * Makes a change of access made on another node bite here within a second: every node reads the
 * events topic from its end and, on an access event (`ACCESS_EVENT_TYPES`), forgets everything it
 * cached about tokens, roles, organizations and repositories. The caches' own time-to-live stays
 * the bound if the events topic cannot be read.
 */
import { Bus, Topics } from "@grove/bus"
import { Effect, Layer } from "effect"
import { ACCESS_EVENT_TYPES, AccessCaches } from "./AccessCaches.ts"

export const isAccessEvent = (value: unknown): boolean =>
  typeof value === "object" && value !== null && ACCESS_EVENT_TYPES.has(String((value as { type?: unknown }).type))

export const AccessEventsFollowerLive = Layer.effectDiscard(Effect.gen(function*() {
  const bus = yield* Bus.Bus
  const caches = yield* AccessCaches
  yield* bus.tail(Topics.events, (record) => Effect.sync(() => {
    if (isAccessEvent(record.value)) caches.invalidateAll()
  })).pipe(
    // A node that cannot follow events still serves: its caches expire on their own.
    Effect.catch((error) => Effect.logWarning("not following access events; caches expire on their own", error))
  )
}))
