/**
 * A record of each deleted organization, written in the deleting transaction by a trigger, so every path records it
 * (Organization.delete, a personal organization going with its user by a foreign key's cascade, anything later).
 * Gc empties the object-store namespaces (content and CI) only of organizations recorded here, once the record is
 * older than its grace, then drops the record: a namespace whose organization this database never deleted (another
 * installation sharing the bucket, a node started against a fresh or restored database) is never touched.
 * Both databases run the same SQL; OR REPLACE, IF NOT EXISTS: applying it again changes nothing.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS deleted_organizations (
    org_id uuid PRIMARY KEY,
    deleted_at timestamptz NOT NULL DEFAULT now()
  )`
  yield* sql`CREATE OR REPLACE FUNCTION grove_record_deleted_organizations() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO deleted_organizations (org_id) SELECT id FROM old_rows ON CONFLICT (org_id) DO NOTHING;
      RETURN NULL;
    END $$`
  yield* sql`CREATE OR REPLACE TRIGGER organizations_record_deleted AFTER DELETE ON organizations REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION grove_record_deleted_organizations()`
})
