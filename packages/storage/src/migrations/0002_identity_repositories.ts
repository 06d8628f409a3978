/**
 * Users, organizations, memberships, tokens (sessions, personal keys), sign-in
 * codes for the command-line client, repositories and the audit log.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE users (
    id uuid PRIMARY KEY,
    username text NOT NULL UNIQUE,
    is_admin boolean NOT NULL DEFAULT false,
    password_hash text,
    created_at timestamptz NOT NULL DEFAULT now(),
    version integer NOT NULL DEFAULT 1
  )`
  yield* sql`CREATE TABLE organizations (
    id uuid PRIMARY KEY,
    slug text NOT NULL UNIQUE,
    name text NOT NULL,
    description text,
    personal_user_id uuid UNIQUE REFERENCES users (id) ON DELETE CASCADE,
    quota_bytes bigint NOT NULL DEFAULT 10737418240,
    created_at timestamptz NOT NULL DEFAULT now(),
    version integer NOT NULL DEFAULT 1
  )`
  yield* sql`CREATE TABLE memberships (
    org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role text NOT NULL CHECK (role IN ('member', 'admin', 'owner')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, user_id)
  )`
  yield* sql`CREATE INDEX memberships_user ON memberships (user_id)`
  yield* sql`CREATE TABLE repositories (
    id uuid PRIMARY KEY,
    org_id uuid NOT NULL REFERENCES organizations (id),
    name text NOT NULL,
    description text,
    is_public boolean NOT NULL DEFAULT false,
    head text,
    -- Storage accounting, maintained by pushes: bytes and objects referenced by this repository.
    size_bytes bigint NOT NULL DEFAULT 0,
    object_count bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    version integer NOT NULL DEFAULT 1
  )`
  yield* sql`CREATE UNIQUE INDEX repositories_org_name ON repositories (org_id, lower(name))`
  // Tokens: only the SHA-256 of the secret is stored; `prefix` is what listings show.
  yield* sql`CREATE TABLE tokens (
    id uuid PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('session', 'personal')),
    secret_hash text NOT NULL UNIQUE,
    prefix text NOT NULL,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name text,
    scope text NOT NULL DEFAULT 'full' CHECK (scope IN ('full', 'read')),
    repo_id uuid REFERENCES repositories (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    last_used_at timestamptz,
    revoked_at timestamptz
  )`
  yield* sql`CREATE INDEX tokens_user ON tokens (user_id, kind)`
  // One-time codes the sign-in page shows for `grove login --headless`: hashed, short-lived, single use.
  // The session is created only when the code is exchanged, so no token secret is ever stored.
  yield* sql`CREATE TABLE cli_auth_codes (
    code_hash text PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
  )`
  yield* sql`CREATE TABLE audit_log (
    id bigserial PRIMARY KEY,
    org_id uuid,
    actor text NOT NULL,
    action text NOT NULL,
    target text NOT NULL,
    details jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
  )`
  yield* sql`CREATE INDEX audit_log_org ON audit_log (org_id, id)`
})
