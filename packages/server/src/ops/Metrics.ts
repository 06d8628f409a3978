/**
 * What `/metrics` shows besides the series updated where things happen (HTTP: ops/RequestLog.ts;
 * entity commands: the bus's CommandMetrics): gauges read at scrape time (process memory, the outbox's
 * backlog) and the object store's latencies. Everything goes to Effect's default metric registry and is
 * serialized by Effect's own Prometheus formatter.
 */
import { MetricHandles } from "@grove/bus"
import { ObjectStore } from "@grove/storage"
import { Effect, Exit, Metric, Stream } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { SqlClient } from "effect/sql"

const memory = MetricHandles.gaugeSeries("grove_process_memory_bytes", "Memory of this process (process.memoryUsage), by kind")
const outboxPending = Metric.gauge("grove_outbox_pending_events", { description: "Events written to the outbox and not yet published" })
const outboxAge = Metric.gauge("grove_outbox_oldest_pending_age_seconds", {
  description: "Age of the oldest event not yet published (0 when none waits): the outbox relay's lag"
})
const scrapeFailures = Metric.counter("grove_metrics_scrape_errors_total", {
  description: "Scrapes whose database-backed gauges could not be read",
  incremental: true
})

const readGauges = Effect.gen(function*() {
  const usage = process.memoryUsage()
  for (const kind of ["rss", "heapTotal", "heapUsed", "external", "arrayBuffers"] as const) {
    memory(kind, () => ({ kind })).updateUnsafe(usage[kind], MetricHandles.DEFAULT_CONTEXT)
  }
  const sql = yield* SqlClient.SqlClient
  yield* sql<{ pending: string; age: number | null }>`
    SELECT count(*)::text AS pending, EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS age
    FROM event_outbox WHERE published_at IS NULL`.pipe(
    Effect.timeout("2 seconds"),
    Effect.flatMap(([row]) =>
      Effect.sync(() => {
        outboxPending.updateUnsafe(Number(row?.pending ?? 0), MetricHandles.DEFAULT_CONTEXT)
        outboxAge.updateUnsafe(Number(row?.age ?? 0), MetricHandles.DEFAULT_CONTEXT)
      })
    ),
    Effect.catchCause(() => Effect.sync(() => scrapeFailures.updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)))
  )
})

/** The Prometheus text of every metric in the default registry, gauges read first. */
export const scrape = Effect.gen(function*() {
  yield* readGauges
  return PrometheusMetrics.formatUnsafe(MetricHandles.DEFAULT_CONTEXT)
})

const objectStoreSeconds = MetricHandles.histogramSeries(
  "grove_object_store_operation_duration_seconds",
  "Object store operations (local files or S3), by operation and outcome; a get until its last byte"
)

const observe = (operation: string, started: number, exit: Exit.Exit<unknown, unknown>) =>
  Effect.sync(() => {
    const outcome = Exit.isSuccess(exit) ? "ok" : "error"
    objectStoreSeconds(`${operation} ${outcome}`, () => ({ operation, outcome }))
      .updateUnsafe((performance.now() - started) / 1000, MetricHandles.DEFAULT_CONTEXT)
  })

const timed = <A, E, R>(operation: string, effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const started = performance.now()
    return Effect.onExit(effect, (exit) => observe(operation, started, exit))
  })

/** The same store, each operation timed. */
export const instrumentObjectStore = (store: ObjectStore.ObjectStoreShape): ObjectStore.ObjectStoreShape => ({
  put: (key, body) => timed("put", store.put(key, body)),
  get: (key) =>
    Stream.suspend(() => {
      const started = performance.now()
      return store.get(key).pipe(Stream.onExit((exit) => observe("get", started, exit)))
    }),
  getRange: (key, offset, length) => timed("get_range", store.getRange(key, offset, length)),
  has: (key) => timed("has", store.has(key)),
  size: (key) => timed("size", store.size(key)),
  delete: (key) => timed("delete", store.delete(key))
})
