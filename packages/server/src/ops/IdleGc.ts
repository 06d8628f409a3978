/**
 * A full garbage collection once the process has gone idle after work that left garbage behind. V8
 * collects when allocation asks for it: after a big push or clone the idle server allocates almost
 * nothing, so the transfer's dead buffers and heap pages stay resident for good (a 200 MiB push
 * left an embedded server ~250 MiB over its idle RSS; a minute later still). `grove-server serve`
 * starts Node with `--expose-gc`; without it (tests' in-process servers) this does nothing.
 *
 * Right after each collection it gives malloc's free pages back (glibc's malloc_trim(0), the addon in
 * packages/server/native, built by `npm install`): the freed buffers' pages stay in malloc's arenas otherwise (a
 * first-booted server settled at ~230 MiB RSS after a 50 MiB clone, ~190 after a trim). It also trims once the process
 * is idle after a busy period, or with malloc's free bytes grown by TRIM_FREED_BYTES, and no collection is due: after
 * 4 of 7 clones V8 grew < GROWTH_BYTES, or collected in a pause inside the clone, and the RSS stayed at 238-253 MiB (a
 * trim with nothing to give back costs < 1 ms). Never on a request's path; at most once per idle period.
 */
import { MetricHandles } from "@grove/bus"
import { Clock, Config, Duration, Effect, Layer, Metric } from "effect"
import { subscribe } from "node:diagnostics_channel"
import type { IncomingMessage, ServerResponse } from "node:http"
import { createRequire } from "node:module"
import { performance } from "node:perf_hooks"

/**
 * How often the process is looked at (the event loop's busy share is over this period): a transfer's garbage goes
 * 4-6 s after its end (two idle periods). Every 10 s, a clone's stayed 10-20 s (5k files / 50 MiB, first boot:
 * RSS 306 MiB for 10 s after the clone, 223 from 20 s); a look costs a few microseconds.
 */
export const CHECK_EVERY = Duration.seconds(2)
// An idle server's heap moves by ~3 MiB; a 50 MiB push or clone leaves ~20-45 MiB behind.
export const GROWTH_BYTES = 16 * 1024 * 1024
/**
 * malloc's free bytes (mallinfo2's fordblks) grown by this since the last trim (or the lowest since) also call for one
 * once idle: on a quiet machine a clone's server waits on the client most of the time, under IDLE_UTILIZATION in every
 * look (5k files / 50 MiB at load 1.6: RSS 231 -> 258 MiB, no busy look, no trim). Not the RSS: a free does not
 * lower it, so a clone's buffers freed after a trim in the clone left no sign there. Trimmed chunks stay free, so
 * the growth, not the level.
 */
export const TRIM_FREED_BYTES = 8 * 1024 * 1024
/**
 * Idle: the event loop busy less than this share of the last period. An idle embedded server's own
 * timers (bus, outbox, CI dispatch) measured 10% at load 15, more on a machine that busy; a transfer keeps it near 100%.
 */
export const IDLE_UTILIZATION = 0.5
/**
 * At most one collection per this long while the process was not busy in between: a server under steady moderate load
 * (20-40% busy, so "idle") makes 16 MiB of garbage within seconds, and a full stop-the-world collection every few
 * seconds shows in its tail latency. A busy period since (a transfer) lifts it: a collection in a pause of a clone
 * otherwise kept the clone's garbage for 30 s after it.
 */
export const MIN_INTERVAL = Duration.seconds(30)

/** Looks in a row found busy that make a busy period (a transfer): one busy look in a swinging load is not. */
export const BUSY_LOOKS = 2

export interface Observation {
  /** The event loop's busy share over the last two looks (0..1): the higher of the two periods'. */
  readonly utilization: number
  /**
   * What V8 holds now: its heap's committed pages and the buffers' memory outside it (`external`), garbage
   * included. Committed, not used: a collection V8 made itself during a transfer leaves its pages committed
   * (a clone's ~25 MiB stayed resident with the used bytes back near the live ones).
   */
  readonly held: number
  /** `held` right after the last collection (or the lowest seen since): the live bytes. */
  readonly floor: number
  /** Milliseconds since this watch's last collection (Infinity: none yet). */
  readonly sinceLast: number
  /** Whether a look since the last collection found the process busy (`IDLE_UTILIZATION` or more). */
  readonly busySinceLast: boolean
}

/**
 * Whether to collect now: idle, no collection for `MIN_INTERVAL` (or busy since), and V8 holds more than `GROWTH_BYTES`
 * past the live bytes. Not the RSS:
 * a collection during a push left the RSS's floor high (malloc's arenas and PGlite's memory do not
 * shrink), and the next transfer's garbage stayed under it for good (a first-booted server after three
 * 50 MiB pushes and a clone: no collection in 30 idle seconds, V8 +40 MiB over its idle size).
 */
export const shouldCollect = ({ busySinceLast, floor, held, sinceLast, utilization }: Observation): boolean =>
  utilization < IDLE_UTILIZATION && held - floor > GROWTH_BYTES && (busySinceLast || sinceLast >= Duration.toMillis(MIN_INTERVAL))

/**
 * Which collection: V8's "last-resort" flavor (`collectAll`) only after a busy period (a transfer that has ended: its
 * young generation and emptied heap pages stay committed otherwise, RSS 218-223 against 187-194 MiB 10 s after a
 * clone), a plain full collection otherwise. Under steady moderate load (20-40% busy: "idle", a collection every
 * MIN_INTERVAL) the load grows them back within seconds, and the last-resort flavor's pause is ~2.5x longer (175-214
 * against 67-88 ms, one stop-the-world pause a request arriving then waits for) and ages unused bytecode twice.
 */
export const collectFlavor = ({ busySinceLast }: Pick<Observation, "busySinceLast">): Flavor =>
  busySinceLast ? "last-resort" : "regular"

/** One look at the process: the event loop's busy share since the last look, and `Observation.held`. */
export interface Look {
  readonly utilization: number
  readonly held: number
}

const heldByV8 = (): number => {
  const { external, heapTotal } = process.memoryUsage()
  return heapTotal + external
}

/** The sync routes that move content (a repository's chunk uploads, batches, fetches and downloads, blob checks and proofs, the push) and git's clone. */
const TRANSFER_PATH = /^\/api\/[^/]+\/[^/]+\/(?:(?:chunks|blobs)\/|push(?:\?|$))|^\/[^/]+\/[^/]+\/git-upload-pack(?:\?|$)/

/**
 * Whether a request is part of a transfer. Not GETs: an event stream or a log followed for minutes would keep the
 * process from ever collecting. Not other writes: short POSTs (a merge, an API write) open at two looks in a row on a
 * write-heavy server made a "busy period" of a moderate load, and so the longer last-resort collection (V3).
 */
export const isTransfer = (method: string | undefined, url: string | undefined): boolean =>
  method !== "GET" && method !== "HEAD" && TRANSFER_PATH.test(url ?? "")

/**
 * The transfers this process is answering (node:http's `http.server.request.start`, each until its response closes):
 * a push's chunk batches, a clone's chunk fetches.
 */
export const openTransfers = (): (() => number) => {
  const open = new Set<ServerResponse>()
  subscribe("http.server.request.start", (message) => {
    const { request, response } = message as { request: IncomingMessage; response: ServerResponse }
    if (!isTransfer(request.method, request.url)) return
    open.add(response)
    response.once("close", () => open.delete(response))
  })
  return () => open.size
}

/**
 * Looks at this process (node's event loop utilization and V8's memory). A look while a transfer is open counts as
 * busy: the event loop of a server waiting on a slow or loaded client's bytes is mostly idle, and a full collection
 * in such a look stopped a 5k-file push for 187 and 225 ms (load 20; in each of two pushes, in their chunk uploads).
 */
export const processLooks = (transfers: () => number = openTransfers()): (() => Look) => {
  let last = performance.eventLoopUtilization()
  return () => {
    const now = performance.eventLoopUtilization()
    const { utilization } = performance.eventLoopUtilization(now, last)
    last = now
    return { utilization: transfers() > 0 ? 1 : utilization, held: heldByV8() }
  }
}

/** glibc's malloc_trim(0): whether memory was released. */
export type Trim = () => boolean

/** The addon: `trim`, and `freeBytes` (mallinfo2's fordblks) where glibc has it (2.33+). */
export interface Malloc {
  readonly trim: Trim
  readonly freeBytes?: (() => number) | undefined
}

/**
 * The addon, or why there is none (not built: another C library than glibc, or the build failed). By path
 * from this file, so the bundle finds it too (bundle.ts makes `import.meta.url` this source's).
 */
export const loadTrim = (): Malloc | string => {
  try {
    const addon = createRequire(import.meta.url)("../../native/build/Release/grove_trim.node") as { trim?: unknown; freeBytes?: unknown }
    if (typeof addon.trim !== "function") return "the addon has no trim"
    return { trim: addon.trim as Trim, freeBytes: typeof addon.freeBytes === "function" ? addon.freeBytes as () => number : undefined }
  } catch (error) {
    return error instanceof Error ? error.message.split("\n")[0]! : String(error)
  }
}

const collections = MetricHandles.counterSeries(
  "grove_idle_collections_total",
  "Full collections of the idle process after a transfer (ops/IdleGc.ts), by what malloc_trim after it did: released, none (nothing to give back) or off"
)
const trims = MetricHandles.counterSeries(
  "grove_idle_trims_total",
  "malloc_trim of the idle process after a busy period without a collection (ops/IdleGc.ts), by whether it released memory"
)
const trimOn = Metric.gauge("grove_idle_malloc_trim", { description: "1 when the idle collection is followed by malloc_trim (the addon is loaded), else 0" })

const mib = (bytes: number) => Math.round(bytes / 1048576)

/**
 * Looks at the process every `CHECK_EVERY` and collects when `shouldCollect` says so (`gc`: V8's), then gives
 * malloc's free pages back (`trim`, when there is one). Idle after a busy period, or with `freeBytes` grown by
 * TRIM_FREED_BYTES, and no collection due, it trims alone: malloc's free pages are not in `held` (the transfer's
 * buffers were freed by V8's own collections).
 */
export const watch = (gc: (flavor: Flavor) => void, look: () => Look = processLooks(), trim?: Trim, freeBytes?: () => number) =>
  Effect.gen(function*() {
    let floor = look().held
    let collectedAt = -Infinity
    // Idle over two looks, not one: a transfer's short pauses (the client busy, the machine loaded) are not its end.
    let before = 1
    let busySinceLast = false
    let busyRun = 0
    // Busy since the last trim, or malloc's free bytes grown past the lowest since: one trim per idle period.
    let busySinceTrim = false
    let freeBase = freeBytes?.() ?? 0
    for (;;) {
      yield* Effect.sleep(CHECK_EVERY)
      const { held, utilization: period } = look()
      const utilization = Math.max(before, period)
      before = period
      // Busy means busy for BUSY_LOOKS looks in a row (a transfer): a load that swings about the threshold is not
      // a busy period, and must not lift MIN_INTERVAL nor call for a trim at each swing.
      busyRun = period >= IDLE_UTILIZATION ? busyRun + 1 : 0
      busySinceLast ||= busyRun >= BUSY_LOOKS
      busySinceTrim ||= busyRun >= BUSY_LOOKS
      // mallinfo2 walks malloc's free chunks under its locks (ms on a fragmented heap): only when idle.
      const idle = utilization < IDLE_UTILIZATION
      const free = idle ? freeBytes?.() ?? 0 : freeBase
      freeBase = Math.min(freeBase, free)
      const now = yield* Clock.currentTimeMillis
      if (shouldCollect({ floor, held, utilization, sinceLast: now - collectedAt, busySinceLast })) {
        const rss = process.memoryUsage.rss()
        const flavor = collectFlavor({ busySinceLast })
        const paused = performance.now()
        gc(flavor)
        const pause = performance.now() - paused
        const collected = process.memoryUsage.rss()
        const released = trim?.()
        collectedAt = now
        busySinceLast = false
        busySinceTrim = false
        freeBase = freeBytes?.() ?? 0
        floor = look().held
        const trimmed = released === undefined ? "off" : released ? "released" : "none"
        collections(trimmed, () => ({ trim: trimmed })).updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)
        yield* Effect.logDebug(`idle: collected garbage (${flavor}, ${Math.round(pause)} ms), RSS ${mib(rss)} -> ${mib(collected)} MiB` +
          (released === undefined ? "" : `, ${mib(process.memoryUsage.rss())} MiB after malloc_trim`))
      } else {
        floor = Math.min(floor, held)
        if (trim !== undefined && idle && (busySinceTrim || free - freeBase >= TRIM_FREED_BYTES)) {
          busySinceTrim = false
          freeBase = free
          const rss = process.memoryUsage.rss()
          const released = trim()
          trims(released ? "yes" : "no", () => ({ released: released ? "yes" : "no" })).updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)
          if (released) yield* Effect.logDebug(`idle: malloc_trim without a collection, RSS ${mib(rss)} -> ${mib(process.memoryUsage.rss())} MiB`)
        }
      }
    }
  })

/** `--expose-gc`'s `gc`, with the options V8's gc extension reads. */
export type ExposedGc = (options?: { readonly type?: "major" | "minor"; readonly execution?: "sync" | "async"; readonly flavor?: "regular" | "last-resort" }) => void

/** A plain full collection ("regular") or V8's "last-resort" one: `collectFlavor` chooses. */
export type Flavor = "regular" | "last-resort"

/**
 * One idle collection of `flavor`. "last-resort" is what V8 runs on a low-memory notification: full collections until
 * nothing more dies, which also give back the heap pages left empty and shrink the young generation; a plain full
 * collection leaves them committed. Three pushes and clones of 5k files / 50 MiB, a collection after each clone
 * (load 16): the two plain ones left 66 MiB of heap committed for 50 used and the RSS at 218 and 223 MiB 10 s after.
 */
export const collectAll = (gc: ExposedGc, flavor: Flavor = "last-resort"): void => gc({ type: "major", execution: "sync", flavor })

/** GROVE_MALLOC_TRIM=0: collect without trimming (to measure the trim). */
const trimWanted = Config.Boolean("GROVE_MALLOC_TRIM").pipe(Config.withDefault(true))

export const IdleGcLive = Layer.effectDiscard(Effect.gen(function*() {
  const exposed = (globalThis as { gc?: ExposedGc }).gc
  if (typeof exposed !== "function") return
  const gc = (flavor: Flavor) => collectAll(exposed, flavor)
  const malloc = (yield* trimWanted) ? loadTrim() : "GROVE_MALLOC_TRIM=0"
  trimOn.updateUnsafe(typeof malloc === "string" ? 0 : 1, MetricHandles.DEFAULT_CONTEXT)
  if (typeof malloc === "string") {
    yield* Effect.logInfo(`idle collection: malloc's free pages are not given back (no malloc_trim: ${malloc})`)
    yield* Effect.forkScoped(watch(gc, processLooks()))
  } else yield* Effect.forkScoped(watch(gc, processLooks(), malloc.trim, malloc.freeBytes))
}))
