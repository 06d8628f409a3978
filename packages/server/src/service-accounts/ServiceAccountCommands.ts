/**
 * The Organization entity's service-account commands: accounts and their keys. A key's secret
 * never travels in a command (replies are stored in the inbox): the edge makes the secret and
 * sends its hash and prefix. Each command locks the organization's row, writes with a
 * compare-and-set on what it read, and records an audit row and an outbox event.
 */
import { ApiServiceAccounts } from "@grove/api"
import type { Entity } from "@grove/bus"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { Actor, Done, lockOrg, record } from "../orgs/OrganizationCommandSupport.ts"
import { AccountGone, AccountKeyGone, AccountNameTaken, ServiceAccountError } from "./ServiceAccountErrors.ts"

export const CreateAccountPayload = Schema.Struct({ name: Schema.String, displayName: Schema.NullOr(Schema.String), ...Actor })
export const UpdateAccountPayload = Schema.Struct({ name: Schema.String, disabled: Schema.Boolean, ...Actor })
export const DeleteAccountPayload = Schema.Struct({ name: Schema.String, ...Actor })
export const CreateKeyPayload = Schema.Struct({
  account: Schema.String,
  keyId: Schema.String,
  name: Schema.String,
  scopes: Schema.String,
  secretHash: Schema.String,
  prefix: Schema.String,
  /** The user the key answers to: their role in the organization caps it. */
  creatorId: Schema.NullOr(Schema.String),
  ...Actor
})
export const RevokeKeyPayload = Schema.Struct({ account: Schema.String, keyId: Schema.String, ...Actor })

interface AccountRow {
  readonly id: string
  readonly name: string
  readonly displayName: string | null
  readonly disabled: boolean
  readonly createdAt: Date
  readonly version: number
}

const accountOf = Effect.fnUntraced(function*(orgId: string, name: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<AccountRow>`SELECT id, name, display_name AS "displayName", disabled, created_at AS "createdAt", version
    FROM service_accounts WHERE org_id = ${orgId} AND name = ${name} FOR UPDATE`
  const row = rows[0]
  if (row === undefined) return yield* new AccountGone({ name })
  return row
})

export const toApiAccount = (row: Omit<AccountRow, "version">, organization: string): ApiServiceAccounts.ServiceAccount => ({
  name: row.name,
  ...(row.displayName === null ? {} : { display_name: row.displayName }),
  disabled: row.disabled,
  organization,
  created_at: row.createdAt.toISOString()
})

export const createAccount = Effect.fn("ServiceAccount.create")(function*(
  payload: typeof CreateAccountPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const existing = yield* sql`SELECT id FROM service_accounts WHERE org_id = ${org.id} AND name = ${payload.name}`
  if (existing.length > 0) return yield* new AccountNameTaken({ name: payload.name })
  yield* sql`INSERT INTO service_accounts ${
    sql.insert({ id: randomUUID(), org_id: org.id, name: payload.name, display_name: payload.displayName, created_by: payload.actorUserId })
  }`
  yield* record(org, payload, {
    action: "sa.create",
    event: "service_account.created",
    target: `service:${payload.name}`,
    details: { account: payload.name }
  })
  return toApiAccount(yield* accountOf(org.id, payload.name), org.slug)
})

export const updateAccount = Effect.fn("ServiceAccount.update")(function*(
  payload: typeof UpdateAccountPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const account = yield* accountOf(org.id, payload.name)
  if (account.disabled === payload.disabled) return toApiAccount(account, org.slug)
  yield* sql`UPDATE service_accounts SET disabled = ${payload.disabled}, version = version + 1
    WHERE id = ${account.id} AND version = ${account.version}`
  yield* record(org, payload, {
    action: payload.disabled ? "sa.disable" : "sa.enable",
    event: payload.disabled ? "service_account.disabled" : "service_account.enabled",
    target: `service:${payload.name}`,
    details: { account: payload.name }
  })
  return toApiAccount({ ...account, disabled: payload.disabled }, org.slug)
})

export const deleteAccount = Effect.fn("ServiceAccount.delete")(function*(
  payload: typeof DeleteAccountPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const account = yield* accountOf(org.id, payload.name)
  yield* sql`DELETE FROM service_accounts WHERE id = ${account.id} AND version = ${account.version}`
  yield* record(org, payload, {
    action: "sa.delete",
    event: "service_account.deleted",
    target: `service:${payload.name}`,
    details: { account: payload.name }
  })
  return { slug: org.slug }
})

export const createKey = Effect.fn("ServiceAccount.createKey")(function*(
  payload: typeof CreateKeyPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const account = yield* accountOf(org.id, payload.account)
  const rows = yield* sql<{ createdAt: Date }>`INSERT INTO service_account_keys ${
    sql.insert({
      id: payload.keyId,
      account_id: account.id,
      name: payload.name,
      secret_hash: payload.secretHash,
      prefix: payload.prefix,
      scopes: payload.scopes,
      created_by: payload.creatorId
    })
  } RETURNING created_at AS "createdAt"`
  yield* record(org, payload, {
    action: "sa.key.create",
    event: "service_account.key_created",
    target: `service:${payload.account}`,
    details: { account: payload.account, key_id: payload.keyId, name: payload.name, scopes: payload.scopes, prefix: payload.prefix }
  })
  return {
    key_id: payload.keyId,
    name: payload.name,
    scopes: payload.scopes,
    prefix: payload.prefix,
    created_at: rows[0]!.createdAt.toISOString()
  } satisfies ApiServiceAccounts.ServiceAccountKey
})

export const revokeKey = Effect.fn("ServiceAccount.revokeKey")(function*(
  payload: typeof RevokeKeyPayload.Type,
  { entityId }: Entity.CommandContext
) {
  const sql = yield* SqlClient.SqlClient
  const org = yield* lockOrg(entityId)
  const account = yield* accountOf(org.id, payload.account)
  if (!/^[0-9a-f-]{36}$/.test(payload.keyId)) return yield* new AccountKeyGone({ keyId: payload.keyId })
  const rows = yield* sql`UPDATE service_account_keys SET revoked_at = now()
    WHERE id = ${payload.keyId} AND account_id = ${account.id} AND revoked_at IS NULL RETURNING id`
  if (rows.length === 0) return yield* new AccountKeyGone({ keyId: payload.keyId })
  yield* record(org, payload, {
    action: "sa.key.revoke",
    event: "service_account.key_revoked",
    target: `service:${payload.account}`,
    details: { account: payload.account, key_id: payload.keyId }
  })
  return { slug: org.slug }
})

const command = <P extends Schema.Top, S extends Schema.Top>(payload: P, success: S) => ({ payload, success, error: ServiceAccountError })

export const commands = {
  CreateServiceAccount: command(CreateAccountPayload, ApiServiceAccounts.ServiceAccount),
  UpdateServiceAccount: command(UpdateAccountPayload, ApiServiceAccounts.ServiceAccount),
  DeleteServiceAccount: command(DeleteAccountPayload, Done),
  CreateServiceAccountKey: command(CreateKeyPayload, ApiServiceAccounts.ServiceAccountKey),
  RevokeServiceAccountKey: command(RevokeKeyPayload, Done)
} satisfies Record<string, Entity.CommandSchemas>

export const handlers: Entity.Handlers<Entity.Entity<"Organization", typeof commands>> = {
  CreateServiceAccount: createAccount,
  UpdateServiceAccount: updateAccount,
  DeleteServiceAccount: deleteAccount,
  CreateServiceAccountKey: createKey,
  RevokeServiceAccountKey: revokeKey
}
