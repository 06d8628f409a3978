/**
 * The read side of the audit log: one organization's entries, newest first, filtered by action,
 * actor and time, one keyset page at a time (`db/Keyset.ts`). The rows are written by the commands
 * they describe, in the same transaction (`entities/CommandSupport.ts` `audit`, organization and
 * user creation); this service only reads them.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import * as Keyset from "../db/Keyset.ts"
import type { KeyColumn, Keyed, PageRequest } from "../db/Keyset.ts"

export interface AuditRecord {
  readonly id: string
  readonly actor: string
  readonly action: string
  readonly target: string
  readonly details: Record<string, unknown>
  readonly createdAt: Date
}

export interface AuditFilter {
  readonly action?: string | undefined
  readonly actor?: string | undefined
  /** ISO 8601 with an offset, checked by the API's schema. */
  readonly since?: string | undefined
}

/** A cursor of this list is one part: the last entry's id, a positive integer in decimal. */
export const isEntryId = (value: unknown): boolean => typeof value === "string" && /^[1-9][0-9]{0,17}$/.test(value)

const SECRET_NAME = /secret|token|password|passwd|credential|private/i
const TOKEN_VALUE = /^grove_/

/**
 * Details as shown: no writer stores a secret today (they hold visibility, branch and commit names,
 * organization slugs), and this keeps it so if one ever tried: a field named like a secret, or a
 * string shaped like a Grove token anywhere inside, is shown as `[redacted]`.
 */
export const redact = (value: unknown, name = ""): unknown => {
  if (name !== "" && SECRET_NAME.test(name)) return "[redacted]"
  if (typeof value === "string") return TOKEN_VALUE.test(value) ? "[redacted]" : value
  if (Array.isArray(value)) return value.map((item) => redact(item))
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, redact(item, key)]))
  }
  return value
}

const detailsOf = (raw: unknown): Record<string, unknown> => {
  const parsed = typeof raw === "string" ? (JSON.parse(raw) as unknown) : raw
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
    ? redact(parsed) as Record<string, unknown>
    : {}
}

export class AuditLog extends Context.Service<AuditLog, {
  /** One page of the organization's entries, newest first: at most `page.limit + 1` rows after `page.after`. */
  readonly list: (orgId: string, filter: AuditFilter, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<AuditRecord>>, SqlError>
}>()("grove/server/audit/AuditLog") {
  static readonly layer = Layer.effect(AuditLog, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Newest first: ids are handed out in insertion order (audit_log_org indexes (org_id, id)).
    const key: ReadonlyArray<KeyColumn> = [{ expr: sql`a.id`, descending: true, read: sql`a.id::text` }]
    return AuditLog.of({
      list: (orgId, filter, page) => {
        const conditions = [
          sql`a.org_id = ${orgId}`,
          ...(filter.action === undefined ? [] : [sql`a.action = ${filter.action}`]),
          ...(filter.actor === undefined ? [] : [sql`a.actor = ${filter.actor}`]),
          ...(filter.since === undefined ? [] : [sql`a.created_at >= CAST(${filter.since} AS timestamptz)`]),
          Keyset.after(sql, key, page.after)
        ]
        return sql<{ id: string; actor: string; action: string; target: string; details: unknown; createdAt: Date }>`
          SELECT a.id::text AS id, a.actor, a.action, a.target, a.details, a.created_at AS "createdAt"
          ${Keyset.selectKeys(sql, key)} FROM audit_log a WHERE ${sql.and(conditions)}
          ${Keyset.orderBy(sql, key)} ${Keyset.limitPlusOne(sql, page)}`.pipe(
          Effect.map((rows) =>
            Keyset.keyed(rows, key).map(({ key, row }) => ({ key, row: { ...row, details: detailsOf(row.details) } }))
          )
        )
      }
    })
  }))
}
