/**
 * Groups of an organization's members (path permissions name them as `@org/group`), and whether an
 * organization's quota was set for it alone (an operator-wide quota then leaves it be).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE org_groups (
    id uuid PRIMARY KEY,
    org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    slug text NOT NULL,
    description text,
    created_at timestamptz NOT NULL DEFAULT now(),
    version integer NOT NULL DEFAULT 1,
    UNIQUE (org_id, slug)
  )`
  yield* sql`CREATE TABLE group_members (
    group_id uuid NOT NULL REFERENCES org_groups (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, user_id)
  )`
  yield* sql`CREATE INDEX group_members_user ON group_members (user_id)`
  yield* sql`ALTER TABLE organizations ADD COLUMN quota_custom boolean NOT NULL DEFAULT false`
})
