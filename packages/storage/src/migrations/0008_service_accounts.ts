/**
 * Service accounts (an organization's non-human identities) and their keys. Only the SHA-256 of a
 * key's secret is stored; `prefix` is what listings show. A key remembers who created it: it never
 * does more than they can (their current role in the organization caps it).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE service_accounts (
    id uuid PRIMARY KEY,
    org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name text NOT NULL,
    display_name text,
    disabled boolean NOT NULL DEFAULT false,
    created_by uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    version integer NOT NULL DEFAULT 1,
    UNIQUE (org_id, name)
  )`
  yield* sql`CREATE TABLE service_account_keys (
    id uuid PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES service_accounts (id) ON DELETE CASCADE,
    name text NOT NULL,
    secret_hash text NOT NULL UNIQUE,
    prefix text NOT NULL,
    scopes text NOT NULL,
    created_by uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at timestamptz
  )`
  yield* sql`CREATE INDEX service_account_keys_account ON service_account_keys (account_id, created_at)`
})
