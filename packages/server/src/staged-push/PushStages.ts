/**
 * The rows of staged pushes (`push_stages`, `push_stage_objects`): what a stage is bound to and
 * what its batches admitted. Batches write here with a compare-and-set on the stage's version;
 * the finalizer (a Branch command, FinalizeStageCommand) reads and closes the stage in its own
 * transaction. Nothing here publishes or references an object.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import * as Keyset from "../db/Keyset.ts"
import type { KeyColumn, Keyed, PageRequest } from "../db/Keyset.ts"
import { audit } from "../entities/CommandSupport.ts"

/**
 * One caller's stages open at once in one repository; more answer 429 until one of theirs finishes, is
 * aborted or expires. Per caller, so one member's abandoned stages never lock the others out.
 */
export const MAX_ACTIVE_STAGES = 8
/** An open stage nobody writes to for this long is abandoned and collected. */
export const STAGE_TTL_HOURS = 24
/** A finished stage's row stays this long, so a replayed finalizer or abort gets the same answer. */
export const TOMBSTONE_DAYS = 7

const COLLECT_EVERY = "1 hour"

export type StageState = "active" | "completed" | "aborted"

export interface StageRow {
  readonly stageId: string
  readonly principal: string
  readonly branch: string
  readonly branchIdentity: string
  readonly expectedHead: string | null
  readonly force: boolean
  readonly state: StageState
  readonly completedTarget: string | null
  readonly commitCount: number
  readonly version: number
}

export interface StageBoundary {
  readonly stageId: string
  readonly principal: string
  readonly branch: string
  readonly branchIdentity: string
  readonly expectedHead: string | null
  readonly force: boolean
}

export interface StageObjects {
  readonly commits: ReadonlyArray<string>
  readonly trees: ReadonlyArray<string>
  readonly blobs: ReadonlyArray<string>
}

type Row = {
  stage_id: string
  principal: string
  branch: string
  branch_identity: string
  expected_head: string | null
  force: boolean
  state: StageState
  completed_target: string | null
  commit_count: number
  version: string
}

export const stageColumns = (sql: SqlClient.SqlClient) =>
  sql`stage_id, principal, branch, branch_identity, expected_head, force, state, completed_target, commit_count, version::text AS version`

export const toStageRow = (r: Row): StageRow => ({
  stageId: r.stage_id,
  principal: r.principal,
  branch: r.branch,
  branchIdentity: r.branch_identity,
  expectedHead: r.expected_head,
  force: r.force === true,
  state: r.state,
  completedTarget: r.completed_target,
  commitCount: Number(r.commit_count),
  version: Number(r.version)
})

/** Same stage, same branch, same boundary: the binding every batch, the finalizer and an abort must repeat. */
export const sameBoundary = (row: StageRow, b: StageBoundary) =>
  row.principal === b.principal && row.branch === b.branch && row.branchIdentity === b.branchIdentity &&
  row.expectedHead === b.expectedHead && row.force === b.force

/** An open stage as the listing shows it (`GET push/staged-v1`). */
export interface OpenStage {
  readonly stage_id: string
  /** Who opened it: a user name, or `service:<name>` for a service account. */
  readonly caller: string
  readonly branch: string
  /** The boundary an abort repeats. */
  readonly expected_branch_head: string | null
  readonly commit_count: number
  readonly created_at: string
  readonly updated_at: string
  readonly expires_at: string
}

/** Who aborts someone else's stage (an admin), for the audit log. */
export interface AbortAudit {
  readonly orgId: string
  readonly actor: string
  readonly repository: string
  readonly branch: string
  readonly of: string
}

export class PushStages extends Context.Service<PushStages, {
  readonly find: (repoId: string, stageId: string) => Effect.Effect<StageRow | undefined, SqlError>
  /** Open stages, oldest first: every caller's, or only `principal`'s. */
  readonly listOpen: (repoId: string, principal: string | undefined, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<OpenStage>>, SqlError>
  /** Opens a stage unless its caller has MAX_ACTIVE_STAGES open in the repository already (undefined then); collects expired stages first. */
  readonly open: (repoId: string, boundary: StageBoundary) => Effect.Effect<StageRow | undefined, SqlError>
  /** Of `hashes`, the commits the stage admitted. */
  readonly commits: (repoId: string, stageId: string) => Effect.Effect<Set<string>, SqlError>
  /** Records a batch's objects if the stage is still at `version` and open; false when it moved. */
  readonly admit: (repoId: string, stageId: string, version: number, objects: StageObjects) => Effect.Effect<boolean, SqlError>
  /** Aborts an open stage at `version` (its objects stay unreferenced), audited when `audited`; false when it moved. */
  readonly abort: (repoId: string, stageId: string, version: number, audited?: AbortAudit) => Effect.Effect<boolean, SqlError>
  /** Removes expired stages (abandoned ones and old tombstones) everywhere; answers how many. */
  readonly collect: Effect.Effect<number, SqlError>
}>()("grove/server/staged-push/PushStages") {
  static readonly layer = Layer.effect(PushStages, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const find = (repoId: string, stageId: string) =>
      sql<Row>`SELECT ${stageColumns(sql)} FROM push_stages WHERE repo_id = ${repoId} AND stage_id = ${stageId}`.pipe(
        Effect.map((rows) => rows[0] === undefined ? undefined : toStageRow(rows[0]))
      )
    const collect = sql<{ n: string }>`WITH gone AS (DELETE FROM push_stages WHERE expires_at < now() RETURNING 1)
      SELECT count(*)::text AS n FROM gone`.pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0)))
    // Every node collects now and then (deletes of expired rows: harmless when two nodes do it at once).
    yield* collect.pipe(
      Effect.catchCause((cause) => Effect.logWarning("collecting expired staged pushes failed", cause)),
      Effect.delay(COLLECT_EVERY),
      Effect.forever,
      Effect.forkScoped
    )
    const oldestFirst: ReadonlyArray<KeyColumn> = [
      { expr: sql`s.created_at`, cast: "timestamptz", read: sql`s.created_at::text` },
      { expr: sql`s.stage_id` }
    ]
    return PushStages.of({
      find,
      listOpen: (repoId, principal, page) =>
        sql<OpenStage & { commit_count: number | string }>`SELECT s.stage_id,
            COALESCE(CASE
              WHEN s.principal LIKE 'user:%' THEN (SELECT u.username FROM users u WHERE u.id::text = substr(s.principal, 6))
              WHEN s.principal LIKE 'service_account:%' THEN
                (SELECT 'service:' || a.name FROM service_accounts a WHERE a.id::text = substr(s.principal, 17))
            END, s.principal) AS caller,
            s.branch, s.expected_head AS expected_branch_head, s.commit_count,
            to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at,
            to_char(s.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS updated_at,
            to_char(s.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS expires_at
            ${Keyset.selectKeys(sql, oldestFirst)}
          FROM push_stages s
          WHERE ${sql.and([
          sql`s.repo_id = ${repoId} AND s.state = 'active' AND s.expires_at >= now()`,
          ...(principal === undefined ? [] : [sql`s.principal = ${principal}`]),
          Keyset.after(sql, oldestFirst, page.after)
        ])}
          ${Keyset.orderBy(sql, oldestFirst)} ${Keyset.limitPlusOne(sql, page)}`.pipe(
          Effect.map((rows) => Keyset.keyed(rows, oldestFirst).map(({ key, row }) => ({ key, row: { ...row, commit_count: Number(row.commit_count) } })))
        ),
      open: Effect.fnUntraced(function*(repoId, b) {
        yield* sql`DELETE FROM push_stages WHERE repo_id = ${repoId} AND expires_at < now()`
        // One statement: the count and the insert see the same rows (a race can pass the limit by one at most).
        // The count is the caller's own: others' stages never use up this caller's room.
        const rows = yield* sql<Row>`INSERT INTO push_stages
            (repo_id, stage_id, principal, branch, branch_identity, expected_head, force, state, expires_at)
          SELECT ${repoId}, ${b.stageId}, ${b.principal}, ${b.branch}, ${b.branchIdentity}, ${b.expectedHead}, ${b.force}, 'active',
            now() + make_interval(hours => ${STAGE_TTL_HOURS})
          WHERE (SELECT count(*) FROM push_stages
            WHERE repo_id = ${repoId} AND principal = ${b.principal} AND state = 'active') < ${MAX_ACTIVE_STAGES}
          ON CONFLICT (repo_id, stage_id) DO NOTHING
          RETURNING ${stageColumns(sql)}`
        if (rows[0] !== undefined) return toStageRow(rows[0])
        // Lost a race to the same stage id, or the caller is at its limit.
        return yield* find(repoId, b.stageId)
      }),
      commits: Effect.fnUntraced(function*(repoId, stageId) {
        const rows = yield* sql<{ hash: string }>`SELECT hash FROM push_stage_objects
          WHERE repo_id = ${repoId} AND stage_id = ${stageId} AND kind = 'commit'`
        return new Set(rows.map((r) => r.hash))
      }),
      admit: (repoId, stageId, version, objects) =>
        sql.withTransaction(Effect.gen(function*() {
          const moved = yield* sql`UPDATE push_stages SET version = version + 1, updated_at = now(),
              expires_at = now() + make_interval(hours => ${STAGE_TTL_HOURS}),
              commit_count = commit_count + ${objects.commits.length}
            WHERE repo_id = ${repoId} AND stage_id = ${stageId} AND version = ${version} AND state = 'active' RETURNING 1`
          if (moved.length === 0) return false
          for (const [kind, hashes] of [["commit", objects.commits], ["tree", objects.trees], ["blob", objects.blobs]] as const) {
            const unique = [...new Set(hashes)]
            for (let i = 0; i < unique.length; i += 5000) {
              yield* sql`INSERT INTO push_stage_objects (repo_id, stage_id, kind, hash)
                SELECT ${repoId}, ${stageId}, ${kind}, unnest(${unique.slice(i, i + 5000)}::text[]) ON CONFLICT DO NOTHING`
            }
          }
          return true
        })),
      abort: (repoId, stageId, version, audited) =>
        sql.withTransaction(Effect.gen(function*() {
          const moved = yield* sql`UPDATE push_stages SET state = 'aborted', version = version + 1, updated_at = now(),
              expires_at = now() + make_interval(days => ${TOMBSTONE_DAYS})
            WHERE repo_id = ${repoId} AND stage_id = ${stageId} AND version = ${version} AND state = 'active' RETURNING 1`
          if (moved.length === 0) return false
          yield* sql`DELETE FROM push_stage_objects WHERE repo_id = ${repoId} AND stage_id = ${stageId}`
          if (audited !== undefined) {
            yield* audit(audited.orgId, audited.actor, "push.stage.abort", audited.repository, { stage_id: stageId, branch: audited.branch, of: audited.of }).pipe(
              Effect.provideService(SqlClient.SqlClient, sql)
            )
          }
          return true
        })),
      collect
    })
  }))
}
