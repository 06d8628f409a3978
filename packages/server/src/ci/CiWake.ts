/**
 * "Runs were queued here": the API's start and trigger handlers tell this node's dispatcher at
 * once, so a free runner claims the run without waiting for the `ci.run.queued` event to come back
 * through the outbox and the bus (which still wakes every node, this one included).
 */
import { Context, Effect, Layer, Queue } from "effect"

export class CiWake extends Context.Service<CiWake, {
  /** Wakes the dispatcher (several wakes before it looks count as one). */
  readonly wake: Effect.Effect<void>
  /** Completes at the next wake. */
  readonly woken: Effect.Effect<void>
}>()("grove/server/ci/CiWake") {
  static readonly layer = Layer.effect(CiWake, Effect.gen(function*() {
    const queue = yield* Queue.dropping<void>(1)
    return CiWake.of({ wake: Queue.offer(queue, undefined).pipe(Effect.asVoid), woken: Queue.take(queue) })
  }))
}
