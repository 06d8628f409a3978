/**
 * A full garbage collection once the process has gone idle after work that left garbage behind. V8
 * collects when allocation asks for it: after a big push or clone the idle server allocates almost
 * nothing, so the transfer's dead buffers and heap pages stay resident for good (a 200 MiB push
 * left an embedded server ~250 MiB over its idle RSS; a minute later still). `grove-server serve`
 * starts Node with `--expose-gc`; without it (tests' in-process servers) this does nothing.
 */
import { Duration, Effect, Layer } from "effect"
import { performance } from "node:perf_hooks"

/** How often the process is looked at, and how much it may have grown since its last collection. */
export const CHECK_EVERY = Duration.seconds(10)
export const GROWTH_BYTES = 32 * 1024 * 1024
/**
 * Idle: the event loop busy less than this share of the last period. An idle embedded server's own
 * timers (bus, outbox, CI dispatch) measured 10% at load 15, more on a machine that busy; a transfer keeps it near 100%.
 */
export const IDLE_UTILIZATION = 0.5

export interface Observation {
  /** The event loop's busy share since the last look (0..1). */
  readonly utilization: number
  readonly rss: number
  /** The RSS after the last collection (or the lowest seen since). */
  readonly floor: number
}

/** Whether to collect now: idle, and grown past the floor by more than `GROWTH_BYTES`. */
export const shouldCollect = ({ floor, rss, utilization }: Observation): boolean =>
  utilization < IDLE_UTILIZATION && rss - floor > GROWTH_BYTES

/** Looks at the process every `CHECK_EVERY` and collects when `shouldCollect` says so (`gc`: V8's). */
export const watch = (gc: () => void) =>
  Effect.gen(function*() {
    let floor = process.memoryUsage.rss()
    let last = performance.eventLoopUtilization()
    for (;;) {
      yield* Effect.sleep(CHECK_EVERY)
      const now = performance.eventLoopUtilization()
      const { utilization } = performance.eventLoopUtilization(now, last)
      last = now
      const rss = process.memoryUsage.rss()
      if (shouldCollect({ floor, rss, utilization })) {
        gc()
        floor = process.memoryUsage.rss()
        yield* Effect.logDebug(`idle: collected garbage, RSS ${Math.round(rss / 1048576)} -> ${Math.round(floor / 1048576)} MiB`)
      } else floor = Math.min(floor, rss)
    }
  })

export const IdleGcLive = Layer.effectDiscard(Effect.gen(function*() {
  const gc = (globalThis as { gc?: () => void }).gc
  if (typeof gc === "function") yield* Effect.forkScoped(watch(gc))
}))
