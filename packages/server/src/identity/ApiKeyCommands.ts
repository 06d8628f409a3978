/**
 * The Organization entity's personal-key commands (keyed by the user's personal organization), so a
 * key's creation and revocation are written with their audit row and outbox event in one
 * transaction, and a revocation reaches every node through the events topic. The secret never
 * travels in a command: the edge makes it and sends its hash and prefix.
 */
import type { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Actor, Done, lockOrg, record } from "../orgs/OrganizationCommandSupport.ts"
import { PersonalKeyGone, ServiceAccountError } from "../service-accounts/ServiceAccountErrors.ts"

export const CreatePersonalKeyPayload = Schema.Struct({
  userId: Schema.String,
  keyId: Schema.String,
  name: Schema.String,
  scope: Schema.Literals(["full", "read"]),
  repoId: Schema.NullOr(Schema.String),
  /** ISO 8601, or null: never. */
  expiresAt: Schema.NullOr(Schema.String),
  secretHash: Schema.String,
  prefix: Schema.String,
  ...Actor
})
export const RevokePersonalKeyPayload = Schema.Struct({ userId: Schema.String, keyId: Schema.String, ...Actor })

const Created = Schema.Struct({ id: Schema.String })

export const createPersonalKey = Effect.fn("ApiKey.create")(function*(
  payload: typeof CreatePersonalKeyPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  yield* sql`INSERT INTO tokens ${
    sql.insert({
      id: payload.keyId,
      kind: "personal",
      secret_hash: payload.secretHash,
      prefix: payload.prefix,
      user_id: payload.userId,
      name: payload.name,
      scope: payload.scope,
      repo_id: payload.repoId,
      expires_at: payload.expiresAt
    })
  }`
  yield* record(org, payload, {
    action: "key.create",
    event: "api_key.created",
    target: payload.name,
    details: { key_id: payload.keyId, prefix: payload.prefix, scope: payload.scope, ...(payload.repoId === null ? {} : { repo_id: payload.repoId }) }
  })
  return { id: payload.keyId }
})

export const revokePersonalKey = Effect.fn("ApiKey.revoke")(function*(
  payload: typeof RevokePersonalKeyPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  if (!/^[0-9a-f-]{36}$/.test(payload.keyId)) return yield* new PersonalKeyGone({ keyId: payload.keyId })
  const rows = yield* sql<{ name: string }>`UPDATE tokens SET revoked_at = now()
    WHERE id = ${payload.keyId} AND user_id = ${payload.userId} AND kind = 'personal' AND revoked_at IS NULL RETURNING name`
  if (rows.length === 0) return yield* new PersonalKeyGone({ keyId: payload.keyId })
  yield* record(org, payload, {
    action: "key.revoke",
    event: "api_key.revoked",
    target: rows[0]!.name,
    details: { key_id: payload.keyId }
  })
  return { slug: org.slug }
})

export const commands = {
  CreatePersonalKey: { payload: CreatePersonalKeyPayload, success: Created, error: ServiceAccountError },
  RevokePersonalKey: { payload: RevokePersonalKeyPayload, success: Done, error: ServiceAccountError }
} satisfies Record<string, Entity.CommandSchemas>

export const handlers: Entity.Handlers<Entity.Entity<"Organization", typeof commands>> = {
  CreatePersonalKey: createPersonalKey,
  RevokePersonalKey: revokePersonalKey
}
