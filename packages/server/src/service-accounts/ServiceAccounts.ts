/**
 * Service accounts and their keys: the read side (changes are Organization entity commands,
 * `ServiceAccountCommands.ts`). Listings never hold a secret: a key shows its prefix.
 */
import type { ApiServiceAccounts } from "@grove/api"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import * as Keyset from "../db/Keyset.ts"
import type { KeyColumn, Keyed, PageRequest } from "../db/Keyset.ts"

interface AccountRow {
  readonly name: string
  readonly displayName: string | null
  readonly disabled: boolean
  readonly createdAt: Date
}

export class ServiceAccounts extends Context.Service<ServiceAccounts, {
  /** One page of the organization's accounts by name. */
  readonly list: (orgId: string, orgSlug: string, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<ApiServiceAccounts.ServiceAccount>>, SqlError>
  /** The account's id, if it exists. */
  readonly find: (orgId: string, name: string) => Effect.Effect<string | undefined, SqlError>
  /** The account and its id, if it exists (its page). */
  readonly get: (orgId: string, orgSlug: string, name: string) => Effect.Effect<{ readonly id: string; readonly account: ApiServiceAccounts.ServiceAccount } | undefined, SqlError>
  /** One page of the account's live keys, oldest first. */
  readonly keys: (accountId: string, page: PageRequest) => Effect.Effect<ReadonlyArray<Keyed<ApiServiceAccounts.ServiceAccountKey>>, SqlError>
}>()("grove/server/service-accounts/ServiceAccounts") {
  static readonly layer = Layer.effect(ServiceAccounts, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const byName: ReadonlyArray<KeyColumn> = [{ expr: sql`a.name` }]
    const byCreation: ReadonlyArray<KeyColumn> = [
      { expr: sql`k.created_at`, cast: "timestamptz", read: sql`k.created_at::text` },
      { expr: sql`k.id`, cast: "uuid" }
    ]
    const columns = sql`a.name, a.display_name AS "displayName", a.disabled, a.created_at AS "createdAt"`
    const toAccount = (row: AccountRow, orgSlug: string): ApiServiceAccounts.ServiceAccount => ({
      name: row.name,
      ...(row.displayName === null ? {} : { display_name: row.displayName }),
      disabled: row.disabled,
      organization: orgSlug,
      created_at: row.createdAt.toISOString()
    })
    return ServiceAccounts.of({
      list: (orgId, orgSlug, page) =>
        sql<AccountRow>`
          SELECT ${columns} ${Keyset.selectKeys(sql, byName)}
          FROM service_accounts a WHERE a.org_id = ${orgId} AND ${Keyset.after(sql, byName, page.after)}
          ${Keyset.orderBy(sql, byName)} ${Keyset.limitPlusOne(sql, page)}`.pipe(Effect.map((rows) =>
          Keyset.keyed(rows, byName).map(({ key, row }) => ({ key, row: toAccount(row, orgSlug) }))
        )),
      get: (orgId, orgSlug, name) =>
        sql<AccountRow & { id: string }>`SELECT a.id, ${columns} FROM service_accounts a WHERE a.org_id = ${orgId} AND a.name = ${name}`.pipe(
          Effect.map((rows) => rows[0] === undefined ? undefined : { id: rows[0].id, account: toAccount(rows[0], orgSlug) })
        ),
      find: (orgId, name) =>
        sql<{ id: string }>`SELECT id FROM service_accounts WHERE org_id = ${orgId} AND name = ${name}`.pipe(
          Effect.map((rows) => rows[0]?.id)
        ),
      keys: (accountId, page) =>
        sql<{ id: string; name: string; scopes: string; prefix: string; createdAt: Date; lastUsedAt: Date | null }>`
          SELECT k.id, k.name, k.scopes, k.prefix, k.created_at AS "createdAt", k.last_used_at AS "lastUsedAt"
          ${Keyset.selectKeys(sql, byCreation)}
          FROM service_account_keys k WHERE k.account_id = ${accountId} AND k.revoked_at IS NULL
          AND ${Keyset.after(sql, byCreation, page.after)} ${Keyset.orderBy(sql, byCreation)} ${Keyset.limitPlusOne(sql, page)}`.pipe(
          Effect.map((rows) =>
            Keyset.keyed(rows, byCreation).map(({ key, row }) => ({
              key,
              row: {
                key_id: row.id,
                name: row.name,
                scopes: row.scopes,
                prefix: row.prefix,
                created_at: row.createdAt.toISOString(),
                ...(row.lastUsedAt === null ? {} : { last_used_at: row.lastUsedAt.toISOString() })
              }
            }))
          )
        )
    })
  }))
}
