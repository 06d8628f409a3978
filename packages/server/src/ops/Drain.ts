/**
 * Readiness across a stop: the node is draining from the moment SIGTERM arrives (or its HTTP server
 * starts closing), and `/readyz` then answers 503. With `--shutdown-delay-ms` the listener stays open
 * that long (http/DrainingServer.ts), so a load balancer sees the node unready and stops sending before
 * new connections are refused; then the usual stop follows (in-flight requests end, the group is left).
 */
import { Context, Effect, Layer } from "effect"

export interface DrainShape {
  readonly draining: () => boolean
  readonly begin: () => void
}

export class Drain extends Context.Service<Drain, DrainShape>()("grove/server/ops/Drain") {}

export const make = (): DrainShape => {
  let draining = false
  return { draining: () => draining, begin: () => void (draining = true) }
}

/** Provides `drain`, marked draining on SIGTERM (before the runtime starts tearing the server down). */
export const layer = (drain: DrainShape) =>
  Layer.effect(
    Drain,
    Effect.acquireRelease(
      Effect.sync(() => {
        process.prependListener("SIGTERM", drain.begin)
        return drain
      }),
      () => Effect.sync(() => void process.off("SIGTERM", drain.begin))
    )
  )
