/**
 * One gc run (content, then retention), its report and metrics, and the server's periodic run.
 * `grove-server gc` (admin/GcCommand.ts) runs the same once. Every node of a cluster runs it on its own
 * schedule: runs at once are safe (a sweep skips marks another run holds; marking twice marks once).
 */
import { MetricHandles } from "@grove/bus"
import { Data, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { DEFAULT_GC, type GcConfig, ServerConfig } from "../Config.ts"
import { collectContent, type ContentReport } from "./Gc.ts"
import { applyRetention, type RetentionReport } from "./Retention.ts"

export interface GcReport {
  readonly dry_run: boolean
  readonly grace_seconds: number
  readonly content: ContentReport
  readonly retention: RetentionReport
  readonly duration_ms: number
}

const runs = MetricHandles.counterSeries("grove_gc_runs_total", "Garbage collection runs (dry runs excluded), by outcome")
const freedBytes = MetricHandles.counterSeries(
  "grove_gc_freed_bytes_total",
  "Bytes garbage collection freed: content chunks, and CI logs and caches past their retention"
)
const freedObjects = MetricHandles.counterSeries("grove_gc_freed_objects_total", "Object-store objects garbage collection deleted, by kind")
const freedRows = MetricHandles.counterSeries("grove_gc_deleted_rows_total", "Database rows garbage collection deleted, by kind")

const count = (series: typeof runs, label: string, key: string, value: number) =>
  value > 0 ? series(label, () => ({ [key]: label })).updateUnsafe(value, MetricHandles.DEFAULT_CONTEXT) : undefined

const record = (report: GcReport) => {
  const { content: c, retention: r } = report
  count(freedBytes, "content", "kind", c.freed.bytes)
  count(freedBytes, "ci", "kind", r.ciBytes)
  count(freedObjects, "content", "kind", c.freed.objects)
  count(freedObjects, "ci", "kind", r.ciObjects)
  const rows: Record<string, number> = {
    blobs: c.freed.blobs,
    chunks: c.freed.chunks,
    staged_pushes: c.stagedPushes,
    ci_log_pieces: r.ciLogPieces,
    ci_caches: r.ciCaches,
    webhook_deliveries: r.webhookDeliveries,
    webhook_attempts: r.webhookAttempts
  }
  for (const [kind, n] of Object.entries(rows)) count(freedRows, kind, "kind", n)
}

class DryRun extends Data.TaggedError("DryRun")<{ readonly report: Omit<GcReport, "duration_ms"> }> {}

/** One run. A dry run does all of it in one transaction that is rolled back, and deletes no object. */
export const runGc = Effect.fn("Gc.run")(function*(settings: Pick<GcConfig, "graceMs" | "retention">, dryRun: boolean) {
  const sql = yield* SqlClient.SqlClient
  const started = performance.now()
  const pass = Effect.gen(function*() {
    const content = yield* collectContent({ graceMs: settings.graceMs, dryRun })
    const retention = yield* applyRetention(settings.retention, dryRun)
    return { dry_run: dryRun, grace_seconds: settings.graceMs / 1000, content, retention }
  })
  const result = dryRun
    ? yield* sql.withTransaction(pass.pipe(Effect.flatMap((report) => Effect.fail(new DryRun({ report }))))).pipe(
      Effect.catchTag("DryRun", (e) => Effect.succeed(e.report))
    )
    : yield* pass.pipe(
      Effect.tapCause(() => Effect.sync(() => count(runs, "error", "outcome", 1)))
    )
  const report: GcReport = { ...result, duration_ms: Math.round(performance.now() - started) }
  if (!dryRun) {
    count(runs, "ok", "outcome", 1)
    record(report)
  }
  return report
})

/** A report in a few lines for a terminal. */
export const formatReport = (r: GcReport): string => {
  const c = r.content
  const t = r.retention
  const verb = r.dry_run ? "would free" : "freed"
  return [
    `gc${r.dry_run ? " (dry run: nothing deleted)" : ""}, grace ${r.grace_seconds} s, ${r.duration_ms} ms`,
    `content: ${verb} ${c.freed.chunks} chunks (${c.freed.bytes} bytes, ${c.freed.usedBytes} of them counted in quotas), ` +
    `${c.freed.blobs} blobs, ${c.freed.objects} objects` +
    (c.freed.namespaces > 0 ? ` (with ${c.freed.namespaces} namespace${c.freed.namespaces === 1 ? "" : "s"} of deleted organizations)` : "") +
    `; ${c.stagedPushes} abandoned staged pushes`,
    `marks: ${c.marked.blobs} blobs and ${c.marked.chunks} chunks newly marked (swept after the grace), ${c.unmarked} dropped (in use again)`,
    `retention: ${verb} ${t.ciLogPieces} CI log pieces, ${t.ciCaches} CI caches (${t.ciObjects} objects, ${t.ciBytes} bytes), ` +
    `${t.webhookDeliveries} webhook deliveries with ${t.webhookAttempts} attempts`
  ].join("\n")
}

/** The periodic run: every `intervalMs` (first one interval after the start); a failed run is logged and the next one comes. */
export const GcLive = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* ServerConfig
  const settings = config.gc ?? DEFAULT_GC
  if (settings.intervalMs <= 0) return
  yield* runGc(settings, false).pipe(
    Effect.tap((report) => Effect.logInfo("gc run", formatReport(report))),
    Effect.catchCause((cause) => Effect.logWarning("gc run failed", cause)),
    Effect.delay(settings.intervalMs),
    Effect.forever,
    Effect.forkScoped
  )
}))
