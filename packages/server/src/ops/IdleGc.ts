/**
 * A full garbage collection once the process has gone idle after work that left garbage behind. V8
 * collects when allocation asks for it: after a big push or clone the idle server allocates almost
 * nothing, so the transfer's dead buffers and heap pages stay resident for good (a 200 MiB push
 * left an embedded server ~250 MiB over its idle RSS; a minute later still). `grove-server serve`
 * starts Node with `--expose-gc`; without it (tests' in-process servers) this does nothing.
 */
import { Duration, Effect, Layer } from "effect"
import { performance } from "node:perf_hooks"

/** How often the process is looked at, and how much V8 may hold past its last collection's live bytes. */
export const CHECK_EVERY = Duration.seconds(10)
// An idle server's heap moves by ~3 MiB; a 50 MiB push or clone leaves ~20-45 MiB behind.
export const GROWTH_BYTES = 16 * 1024 * 1024
/**
 * Idle: the event loop busy less than this share of the last period. An idle embedded server's own
 * timers (bus, outbox, CI dispatch) measured 10% at load 15, more on a machine that busy; a transfer keeps it near 100%.
 */
export const IDLE_UTILIZATION = 0.5
/**
 * At most one collection per this long: a server under steady moderate load (20-40% busy, so "idle") makes
 * 16 MiB of garbage within a period, and a full stop-the-world collection every 10 s shows in its tail latency.
 */
export const MIN_INTERVAL = Duration.seconds(30)

export interface Observation {
  /** The event loop's busy share since the last look (0..1). */
  readonly utilization: number
  /** What V8 holds now: its heap's used bytes and the buffers' memory outside it (`external`), garbage included. */
  readonly held: number
  /** `held` right after the last collection (or the lowest seen since): the live bytes. */
  readonly floor: number
  /** Milliseconds since this watch's last collection (Infinity: none yet). */
  readonly sinceLast: number
}

/**
 * Whether to collect now: idle, no collection for `MIN_INTERVAL`, and V8 holds more than `GROWTH_BYTES` past the live bytes. Not the RSS:
 * a collection during a push left the RSS's floor high (malloc's arenas and PGlite's memory do not
 * shrink), and the next transfer's garbage stayed under it for good (a first-booted server after three
 * 50 MiB pushes and a clone: no collection in 30 idle seconds, V8 +40 MiB over its idle size).
 */
export const shouldCollect = ({ floor, held, sinceLast, utilization }: Observation): boolean =>
  utilization < IDLE_UTILIZATION && held - floor > GROWTH_BYTES && sinceLast >= Duration.toMillis(MIN_INTERVAL)

const heldByV8 = (): number => {
  const { external, heapUsed } = process.memoryUsage()
  return heapUsed + external
}

/** Looks at the process every `CHECK_EVERY` and collects when `shouldCollect` says so (`gc`: V8's). */
export const watch = (gc: () => void) =>
  Effect.gen(function*() {
    let floor = heldByV8()
    let collectedAt = -Infinity
    let last = performance.eventLoopUtilization()
    for (;;) {
      yield* Effect.sleep(CHECK_EVERY)
      const now = performance.eventLoopUtilization()
      const { utilization } = performance.eventLoopUtilization(now, last)
      last = now
      const held = heldByV8()
      if (shouldCollect({ floor, held, utilization, sinceLast: performance.now() - collectedAt })) {
        const rss = process.memoryUsage.rss()
        gc()
        collectedAt = performance.now()
        floor = heldByV8()
        yield* Effect.logDebug(`idle: collected garbage, RSS ${Math.round(rss / 1048576)} -> ${Math.round(process.memoryUsage.rss() / 1048576)} MiB`)
      } else floor = Math.min(floor, held)
    }
  })

export const IdleGcLive = Layer.effectDiscard(Effect.gen(function*() {
  const gc = (globalThis as { gc?: () => void }).gc
  if (typeof gc === "function") yield* Effect.forkScoped(watch(gc))
}))
