/**
 * What every command of the Organization entity shares, whichever feature defines it (organizations,
 * service accounts, personal keys): the sender's fields, the organization locked under the command,
 * and the audit row and event it records.
 */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { Organization } from "../access/Organizations.ts"
import { audit, emit } from "../entities/CommandSupport.ts"
import { OrgGone } from "./OrganizationErrors.ts"

/** Who sends the command: their name (audit rows) and, for owner changes, who they are. */
export const Actor = {
  actor: Schema.String,
  actorUserId: Schema.NullOr(Schema.String),
  actorSiteAdmin: Schema.Boolean
}

export const Done = Schema.Struct({ slug: Schema.String })

export type ActorFields = { readonly actor: string; readonly actorUserId: string | null; readonly actorSiteAdmin: boolean }

export interface OrgRow extends Organization {
  readonly version: number
}

const orgColumns = (sql: SqlClient.SqlClient) =>
  sql`id, slug, name, description, personal_user_id IS NOT NULL AS personal, created_at AS "createdAt", version`

/** The organization of the command's key, locked for the transaction. */
export const lockOrg = Effect.fnUntraced(function*(slug: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<OrgRow>`SELECT ${orgColumns(sql)} FROM organizations WHERE slug = ${slug} FOR UPDATE`
  const row = rows[0]
  if (row === undefined) return yield* new OrgGone({ slug })
  return row
})

/** What every command records: the audit row and the event, in the command's transaction. */
export const record = Effect.fnUntraced(function*(
  org: OrgRow,
  payload: ActorFields,
  change: { readonly action: string; readonly event: string; readonly target?: string; readonly details?: Record<string, unknown> }
) {
  yield* audit(org.id, payload.actor, change.action, change.target ?? org.slug, change.details ?? {})
  yield* emit(change.event, { org: org.slug, org_id: org.id, actor: payload.actor, ...change.details })
})
