/**
 * Retention: what the operator keeps only for a while. Each setting unset keeps everything (as before
 * this existed):
 * - CI log pieces of runs that finished longer ago than `ciLogsMs` (the run rows and their outcome stay);
 * - CI cache archives not written for longer than `ciCachesMs`;
 * - webhook deliveries (with their attempts) finished (succeeded, dead, skipped) longer ago than `webhookDeliveriesMs`.
 * CI objects are content-addressed per organization (`ci-<org>`) and shared by equal pieces, so an
 * object goes only when no log piece or cache row of its organization names it any more. A new piece
 * with the same bytes written between that check and the delete would lose its object: the window is
 * the delete call itself (the rows are gone by then), and the piece is a log line, never repository content.
 */
import { ObjectStore } from "@grove/storage"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { deleteObjects } from "./Gc.ts"

export interface RetentionSettings {
  readonly ciLogsMs?: number | undefined
  readonly ciCachesMs?: number | undefined
  readonly webhookDeliveriesMs?: number | undefined
}

export interface RetentionReport {
  readonly ciLogPieces: number
  readonly ciCaches: number
  /** CI objects (log pieces and cache archives) deleted from the object store, and their bytes. */
  readonly ciObjects: number
  readonly ciBytes: number
  readonly webhookDeliveries: number
  readonly webhookAttempts: number
}

const ciNamespace = (orgId: string) => `ci-${orgId}`

const before = (ms: number) => new Date(Date.now() - ms).toISOString()

type Sql = SqlClient.SqlClient

/** Of removed CI rows' objects, those no remaining row of the organization names. */
const unnamed = (sql: Sql, removed: ReadonlyArray<{ org_id: string; object_hash: string }>) => {
  const unique = [...new Map(removed.map((r) => [`${r.org_id}/${r.object_hash}`, r])).values()]
  if (unique.length === 0) return Effect.succeed([] as ReadonlyArray<{ org_id: string; hash: string }>)
  return sql<{ org_id: string; hash: string }>`SELECT g.org_id::text AS org_id, g.hash
    FROM unnest(${unique.map((r) => r.org_id)}::uuid[], ${unique.map((r) => r.object_hash)}::text[]) AS g(org_id, hash)
    WHERE NOT EXISTS (SELECT 1 FROM ci_log_chunks l JOIN ci_runs c ON c.id = l.run_id JOIN repositories r ON r.id = c.repo_id
        WHERE r.org_id = g.org_id AND l.object_hash = g.hash)
      AND NOT EXISTS (SELECT 1 FROM ci_caches k JOIN repositories r ON r.id = k.repo_id WHERE r.org_id = g.org_id AND k.object_hash = g.hash)`
    .unprepared
}

/** Applies the retention settings once; with `dryRun` the caller rolls back, and objects are only counted. */
export const applyRetention = Effect.fn("Retention.apply")(function*(settings: RetentionSettings, dryRun: boolean) {
  const sql = yield* SqlClient.SqlClient
  const store = yield* ObjectStore.ObjectStore
  const ci = yield* sql.withTransaction(Effect.gen(function*() {
    const pieces = settings.ciLogsMs === undefined ? [] : yield* sql<{ org_id: string; object_hash: string; bytes: number }>`
      DELETE FROM ci_log_chunks l USING ci_runs c, repositories r
      WHERE c.id = l.run_id AND r.id = c.repo_id AND c.status = 'completed' AND c.finished_at < ${before(settings.ciLogsMs)}::timestamptz
      RETURNING r.org_id::text AS org_id, l.object_hash, l.bytes`.unprepared
    const caches = settings.ciCachesMs === undefined ? [] : yield* sql<{ org_id: string; object_hash: string; bytes: string }>`
      DELETE FROM ci_caches k USING repositories r
      WHERE r.id = k.repo_id AND k.updated_at < ${before(settings.ciCachesMs)}::timestamptz
      RETURNING r.org_id::text AS org_id, k.object_hash, k.bytes::text AS bytes`.unprepared
    const found = yield* unnamed(sql, [...pieces, ...caches])
    const sizes = new Map([...pieces, ...caches].map((r) => [`${r.org_id}/${r.object_hash}`, Number(r.bytes)]))
    const keyOf = (o: { org_id: string; hash: string }) => ({ namespace: ciNamespace(o.org_id), hash: o.hash })
    const deleted = dryRun ? found.map(keyOf) : yield* deleteObjects(store, found.map(keyOf))
    const done = new Set(deleted.map((k) => `${k.namespace}/${k.hash}`))
    const objects = found.filter((o) => done.has(`${ciNamespace(o.org_id)}/${o.hash}`))
    return {
      ciLogPieces: pieces.length,
      ciCaches: caches.length,
      ciObjects: objects.length,
      ciBytes: objects.reduce((sum, o) => sum + (sizes.get(`${o.org_id}/${o.hash}`) ?? 0), 0)
    }
  }))
  const webhooks = settings.webhookDeliveriesMs === undefined ? [] : yield* sql<{ deliveries: string; attempts: string }>`
    WITH old AS (SELECT id FROM webhook_deliveries
        WHERE status IN ('succeeded', 'dead', 'skipped') AND updated_at < ${before(settings.webhookDeliveriesMs)}::timestamptz),
      attempts AS (SELECT count(*) AS n FROM webhook_attempts a JOIN old ON old.id = a.delivery_id),
      gone AS (DELETE FROM webhook_deliveries d USING old WHERE d.id = old.id RETURNING 1)
    SELECT (SELECT count(*) FROM gone)::text AS deliveries, (SELECT n FROM attempts)::text AS attempts`.unprepared
  return {
    ...ci,
    webhookDeliveries: Number(webhooks[0]?.deliveries ?? 0),
    webhookAttempts: Number(webhooks[0]?.attempts ?? 0)
  } satisfies RetentionReport
})
