/**
 * What `/metrics` shows besides the series updated where things happen (HTTP: ops/RequestLog.ts;
 * entity commands: the bus's CommandMetrics; webhook attempts: webhooks/WebhookDelivery.ts; CI runner
 * slots: ci/CiDispatcher.ts): gauges read at scrape time (process memory; the consumer groups' lag from
 * the bus; one database round trip for the outbox's backlog, pending webhook deliveries and queued and
 * running CI runs; this node's database connections as PostgreSQL sees them) and the object store's
 * latencies. Everything goes to Effect's default metric registry and is serialized by Effect's own
 * Prometheus formatter.
 */
import { Bus, MetricHandles } from "@grove/bus"
import { ObjectStore } from "@grove/storage"
import { Effect, Exit, Metric, Stream } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { SqlClient } from "effect/sql"
import { ServerConfig } from "../Config.ts"

const memory = MetricHandles.gaugeSeries("grove_process_memory_bytes", "Memory of this process (process.memoryUsage), by kind")
const outboxPending = Metric.gauge("grove_outbox_pending_events", { description: "Events written to the outbox and not yet published" })
const outboxAge = Metric.gauge("grove_outbox_oldest_pending_age_seconds", {
  description: "Age of the oldest event not yet published (0 when none waits): the outbox relay's lag"
})
const scrapeFailures = Metric.counter("grove_metrics_scrape_errors_total", {
  description: "Scrapes whose database-backed gauges could not be read",
  incremental: true
})
const consumerLag = MetricHandles.gaugeSeries(
  "grove_bus_consumer_lag",
  "Records waiting for this node's worker of a partition (end offset minus the next to process), by consumer group, topic and partition; " +
    "0 once the partition is no longer this node's. For grove.entities on grove.commands: each partition's command queue"
)
const webhooksPending = Metric.gauge("grove_webhook_deliveries_pending", {
  description: "Webhook deliveries not yet delivered, dead or skipped (pending, delivering or retrying), all nodes"
})
const ciRuns = MetricHandles.gaugeSeries("grove_ci_runs", "CI runs queued or running, all nodes, by status")
const dbPing = Metric.gauge("grove_db_ping_duration_seconds", {
  description: "The scrape's SELECT 1 through the connection pool (waits for a free connection too)"
})
const dbConnections = MetricHandles.gaugeSeries(
  "grove_db_connections",
  "This node's PostgreSQL connections as pg_stat_activity shows them (cluster mode), by state: active, idle, idle_in_transaction, waiting_lock"
)
const CONNECTION_STATES = ["active", "idle", "idle_in_transaction", "waiting_lock"] as const

/** How this node's connections are named in PostgreSQL (`application_name`), so a scrape finds its own. */
export const applicationName = (nodeId: string) => `grove ${nodeId}`.slice(0, 63)

const set = (gauge: Metric.Gauge<number>, value: number) => gauge.updateUnsafe(value, MetricHandles.DEFAULT_CONTEXT)

/** Partitions reported before: a partition that moved to another node reads 0 here. */
const lagSeries = new Set<string>()

const readLag = Effect.gen(function*() {
  const bus = yield* Bus.Bus
  const lags = yield* bus.lag.pipe(Effect.timeoutOption("2 seconds"))
  if (lags._tag === "None") return yield* Effect.sync(() => scrapeFailures.updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT))
  const now = new Set<string>()
  for (const lag of lags.value) {
    const key = `${lag.group}\u0000${lag.topic}\u0000${lag.partition}`
    now.add(key)
    lagSeries.add(key)
    set(consumerLag(key, () => ({ group: lag.group, topic: lag.topic, partition: String(lag.partition) })), lag.records)
  }
  for (const key of lagSeries) {
    if (!now.has(key)) set(consumerLag(key, () => ({})), 0)
  }
})

const readDatabase = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const config = yield* ServerConfig
  const started = performance.now()
  yield* sql`SELECT 1`
  set(dbPing, (performance.now() - started) / 1000)
  const [row] = yield* sql<{
    outbox_pending: number
    outbox_age: number | null
    webhooks_pending: number
    ci_queued: number
    ci_running: number
  }>`SELECT
    (SELECT count(*) FROM event_outbox WHERE published_at IS NULL)::int AS outbox_pending,
    (SELECT EXTRACT(EPOCH FROM now() - min(created_at)) FROM event_outbox WHERE published_at IS NULL)::float8 AS outbox_age,
    (SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending', 'delivering', 'retrying'))::int AS webhooks_pending,
    (SELECT count(*) FROM ci_runs WHERE status = 'queued')::int AS ci_queued,
    (SELECT count(*) FROM ci_runs WHERE status = 'running')::int AS ci_running`
  set(outboxPending, Number(row?.outbox_pending ?? 0))
  set(outboxAge, Number(row?.outbox_age ?? 0))
  set(webhooksPending, Number(row?.webhooks_pending ?? 0))
  set(ciRuns("queued", () => ({ status: "queued" })), Number(row?.ci_queued ?? 0))
  set(ciRuns("running", () => ({ status: "running" })), Number(row?.ci_running ?? 0))
  // PGlite has one connection inside this process: nothing to show.
  if (config.mode !== "cluster") return
  const states = yield* sql<{ state: string; connections: number }>`
    SELECT CASE WHEN wait_event_type = 'Lock' THEN 'waiting_lock'
      WHEN state LIKE 'idle in transaction%' THEN 'idle_in_transaction'
      WHEN state = 'idle' THEN 'idle' ELSE 'active' END AS state, count(*)::int AS connections
    FROM pg_stat_activity WHERE application_name = ${applicationName(config.nodeId)} GROUP BY 1`
  for (const state of CONNECTION_STATES) {
    set(dbConnections(state, () => ({ state })), Number(states.find((s) => s.state === state)?.connections ?? 0))
  }
})

const readGauges = Effect.gen(function*() {
  const usage = process.memoryUsage()
  for (const kind of ["rss", "heapTotal", "heapUsed", "external", "arrayBuffers"] as const) {
    set(memory(kind, () => ({ kind })), usage[kind])
  }
  yield* Effect.all([
    readLag,
    readDatabase.pipe(
      Effect.timeout("2 seconds"),
      Effect.catchCause(() => Effect.sync(() => scrapeFailures.updateUnsafe(1, MetricHandles.DEFAULT_CONTEXT)))
    )
  ], { concurrency: 2, discard: true })
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
  delete: (key) => timed("delete", store.delete(key)),
  namespaces: timed("list", store.namespaces),
  deleteNamespace: (namespace) => timed("delete_namespace", store.deleteNamespace(namespace))
})
