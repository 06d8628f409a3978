/**
 * Every committed change to what the nodes cache about access notifies `grove_access`, in the
 * changing transaction (so at its commit, and only if it commits), whatever code made it:
 * - `repository:<id>` for a repository's row (its record, head and visibility are cached by name);
 * - the table's name for tokens, keys, accounts, users, organizations, memberships and groups
 *   (rare changes: a node forgets all it cached about access).
 * Column lists leave out what no cache holds (last use, password hashes, storage accounting), so a
 * request's `last_used_at` write or a push's byte count does not empty the caches.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE FUNCTION grove_access_repository() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('grove_access', 'repository:' || (CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END)::text);
      RETURN NULL;
    END $$`
  yield* sql`CREATE FUNCTION grove_access_table() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('grove_access', TG_TABLE_NAME);
      RETURN NULL;
    END $$`
  yield* sql`CREATE TRIGGER repositories_access AFTER UPDATE OF org_id, name, description, is_public, head, updated_at, version
    OR DELETE ON repositories FOR EACH ROW EXECUTE FUNCTION grove_access_repository()`
  const tables: ReadonlyArray<readonly [string, string]> = [
    ["tokens", "UPDATE OF revoked_at, expires_at, scope, repo_id, user_id, secret_hash OR DELETE"],
    ["service_account_keys", "UPDATE OF revoked_at, scopes, created_by, account_id, secret_hash OR DELETE"],
    ["service_accounts", "UPDATE OF disabled, name, org_id, created_by OR DELETE"],
    ["users", "UPDATE OF username, is_admin OR DELETE"],
    ["organizations", "UPDATE OF slug, name, description, personal_user_id OR DELETE"],
    // Absences are cached here (no membership, no group), so an insert counts too.
    ["memberships", "INSERT OR UPDATE OR DELETE"],
    ["org_groups", "INSERT OR UPDATE OR DELETE"],
    ["group_members", "INSERT OR UPDATE OR DELETE"]
  ]
  for (const [table, events] of tables) {
    yield* sql.unsafe(`CREATE TRIGGER ${table}_access AFTER ${events} ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION grove_access_table()`)
  }
})
