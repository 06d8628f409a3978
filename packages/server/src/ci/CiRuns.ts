/** CI reads, straight from the database (reads never go through the entities). */
import type { Workflow } from "@grove/core/ci/Workflow"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { ciRunColumns, type CiRunRecord, fromRow } from "./CiRecord.ts"
import { SecretBox } from "./CiSecrets.ts"

export interface RunnableRun extends CiRunRecord {
  readonly workflow: Workflow
  readonly orgId: string
  readonly owner: string
  readonly repoName: string
  /** The repository's secrets, decrypted, for the steps' environment. */
  readonly secrets: ReadonlyMap<string, string>
}

export class CiRuns extends Context.Service<CiRuns, {
  /** The repository's runs, newest first. */
  readonly list: (repoId: string, limit: number) => Effect.Effect<ReadonlyArray<CiRunRecord>, SqlError>
  /** A page of the runs, newest first: ids below `before` (from the newest when undefined), of one branch when given. */
  readonly page: (
    repoId: string,
    options: { readonly branch?: string | undefined; readonly before?: number | undefined; readonly limit: number }
  ) => Effect.Effect<ReadonlyArray<CiRunRecord>, SqlError>
  readonly get: (repoId: string, runId: number) => Effect.Effect<CiRunRecord | undefined, SqlError>
  /** A run with what its runner needs: the workflow, the repository's names and its secrets (one statement). */
  readonly runnable: (runId: number) => Effect.Effect<RunnableRun | undefined, SqlError>
  /** A run's status and the node it runs on (undefined: no such run). */
  readonly claimOf: (runId: number) => Effect.Effect<{ readonly status: string; readonly runnerNode: string | null } | undefined, SqlError>
  /** The oldest queued runs (ids), for runners with free slots. */
  readonly queued: (limit: number) => Effect.Effect<ReadonlyArray<{ readonly id: number; readonly repoKey: string }>, SqlError>
  /**
   * Running runs whose runner has not beaten for `staleMs` (its `ci_runner_heartbeats` row; a run no runner
   * ever beat for counts from its start), by the database's clock.
   */
  readonly stale: (staleMs: number) => Effect.Effect<ReadonlyArray<{ readonly id: number; readonly repoKey: string; readonly heartbeatAt: Date; readonly node: string }>, SqlError>
  /** Drops the heartbeat rows of runs that completed. */
  readonly forgetBeats: Effect.Effect<void, SqlError>
  readonly secretNames: (repoId: string) => Effect.Effect<ReadonlyArray<{ readonly name: string; readonly updated_at: string; readonly updated_by: string }>, SqlError>
}>()("grove/server/ci/CiRuns") {
  static readonly layer = Layer.effect(CiRuns, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const box = yield* SecretBox
    const repoKey = sql`o.slug || '/' || lower(r.name)`
    /** Decrypted secrets; one that does not open (another key) is left out. */
    const opened = (repoId: string, rows: ReadonlyArray<{ readonly name: string; readonly ciphertext: string }>) => {
      const out = new Map<string, string>()
      for (const row of rows) {
        const value = box.open(repoId, row.name, row.ciphertext)
        if (value !== undefined) out.set(row.name, value)
      }
      return out
    }
    // `ci_runs.id`, not `id`: ORDER BY would take the text alias of the select list and sort 9 above 10.
    const page = (repoId: string, { branch, before, limit }: { readonly branch?: string | undefined; readonly before?: number | undefined; readonly limit: number }) =>
      sql<Record<string, unknown>>`SELECT ${ciRunColumns(sql)} FROM ci_runs WHERE repo_id = ${repoId}
        ${branch === undefined ? sql`` : sql`AND branch = ${branch}`} ${before === undefined ? sql`` : sql`AND ci_runs.id < ${before}`}
        ORDER BY ci_runs.id DESC LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map(fromRow)))
    return CiRuns.of({
      list: (repoId, limit) => page(repoId, { limit }),
      page,
      get: (repoId, runId) =>
        sql<Record<string, unknown>>`SELECT ${ciRunColumns(sql)} FROM ci_runs WHERE repo_id = ${repoId} AND id = ${runId}`.pipe(
          Effect.map((rows) => rows[0] === undefined ? undefined : fromRow(rows[0]))
        ),
      runnable: (runId) =>
        sql<Record<string, unknown>>`SELECT c.*, r.org_id AS "orgId", o.slug AS owner, r.name AS "repoName",
            (SELECT coalesce(json_agg(json_build_object('name', s.name, 'ciphertext', s.ciphertext)), '[]'::json)
              FROM ci_secrets s WHERE s.repo_id = c."repoId")::text AS secrets
          FROM (SELECT ${ciRunColumns(sql)}, workflow FROM ci_runs WHERE id = ${runId}) c
          JOIN repositories r ON r.id = c."repoId" JOIN organizations o ON o.id = r.org_id`.pipe(
          Effect.map((rows) => {
            const row = rows[0]
            if (row === undefined || row.workflow === null) return undefined
            const workflow = (typeof row.workflow === "string" ? JSON.parse(row.workflow) : row.workflow) as Workflow
            const secrets = opened(String(row.repoId), JSON.parse(String(row.secrets)))
            return { ...fromRow(row), workflow, orgId: String(row.orgId), owner: String(row.owner), repoName: String(row.repoName), secrets }
          })
        ),
      claimOf: (runId) =>
        sql<{ status: string; runner_node: string | null }>`SELECT status, runner_node FROM ci_runs WHERE id = ${runId}`.pipe(
          Effect.map((rows) => rows[0] === undefined ? undefined : { status: rows[0].status, runnerNode: rows[0].runner_node })
        ),
      queued: (limit) =>
        sql<{ id: string; repo_key: string }>`SELECT c.id::int8::text AS id, ${repoKey} AS repo_key FROM ci_runs c
          JOIN repositories r ON r.id = c.repo_id JOIN organizations o ON o.id = r.org_id
          WHERE c.status = 'queued' ORDER BY c.id LIMIT ${limit}`.pipe(
          Effect.map((rows) => rows.map((row) => ({ id: Number(row.id), repoKey: row.repo_key })))
        ),
      stale: (staleMs) =>
        sql<{ id: string; repo_key: string; heartbeat_at: Date | string; runner_node: string }>`SELECT c.id::int8::text AS id,
            ${repoKey} AS repo_key, coalesce(h.heartbeat_at, c.started_at) AS heartbeat_at, c.runner_node FROM ci_runs c
          JOIN repositories r ON r.id = c.repo_id JOIN organizations o ON o.id = r.org_id
          LEFT JOIN ci_runner_heartbeats h ON h.run_id = c.id
          WHERE c.status = 'running'
            AND coalesce(h.heartbeat_at, c.started_at) < now() - ${staleMs} * interval '1 millisecond'`.pipe(
          Effect.map((rows) =>
            rows.map((row) => ({ id: Number(row.id), repoKey: row.repo_key, heartbeatAt: new Date(row.heartbeat_at), node: row.runner_node }))
          )
        ),
      forgetBeats: sql`DELETE FROM ci_runner_heartbeats h USING ci_runs c WHERE c.id = h.run_id AND c.status = 'completed'`.pipe(
        Effect.asVoid
      ),
      secretNames: (repoId) =>
        sql<{ name: string; updated_at: Date | string; updated_by: string }>`SELECT name, updated_at, updated_by FROM ci_secrets
          WHERE repo_id = ${repoId} ORDER BY name`.pipe(
          Effect.map((rows) => rows.map((r) => ({ name: r.name, updated_at: new Date(r.updated_at).toISOString(), updated_by: r.updated_by })))
        ),
    })
  }))
}
