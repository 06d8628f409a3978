/**
 * The content tables' references to their organization, repository or blob are checked per statement, not per
 * row. A foreign key checks each inserted row with a trigger call and a lookup of its parent: a 5k-file first push
 * inserts 5,000 chunk rows, 5,000 upload grants, 5,000 blobs and their 5,000 chunk mappings, and 5,000 repository
 * rows, and those checks were about a third of the inserts' CPU in PGlite (5,000 rows, CPU ms, foreign keys ->
 * these triggers: blobs + blob_chunks ~180 -> ~125, chunks ~90 -> ~55, upload grants ~75 -> ~50, the publish's
 * repository rows and accounting ~120 -> ~90). The hottest references are replaced by triggers that keep what the
 * keys guaranteed, each in one statement:
 *
 * - No orphan is inserted: after each INSERT statement, the distinct parents its new rows name are looked up and
 *   locked FOR KEY SHARE (as a foreign key's check locks them: a concurrent delete of the parent waits for this
 *   transaction, then cascades to what it committed; one that deleted first makes this lookup miss), and the
 *   statement fails with foreign_key_violation (23503) when one is missing.
 * - Deleting a parent deletes its rows (ON DELETE CASCADE): after each DELETE statement on organizations,
 *   repositories and blobs, from the deleted rows, whoever deletes (Organization.delete, a personal organization
 *   going with its user by a foreign key's cascade, Repository.delete, gc's sweep of blobs): no code changes.
 * - Keys do not change: an UPDATE that changes a referencing column, or a referenced key, fails (no code does; a
 *   foreign key would have checked the new value or refused while referenced). AFTER row triggers with WHEN: a
 *   BEFORE row trigger would lock every row an UPDATE of the table changes (the publish's `referenced` mark on
 *   chunks would no longer be a heap-only update).
 * Not covered: TRUNCATE of a parent (a foreign key refuses it; nothing truncates these tables).
 *
 * Both databases run the same SQL. References that are not on a push's hot path keep their foreign keys.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** child, its referencing columns, parent, the join of the child's rows `c` with the parent's `p`. */
const references: ReadonlyArray<{ child: string; columns: string; parent: string; on: string }> = [
  { child: "chunks", columns: "org_id", parent: "organizations", on: "p.id = c.org_id" },
  { child: "blobs", columns: "org_id", parent: "organizations", on: "p.id = c.org_id" },
  { child: "trees", columns: "org_id", parent: "organizations", on: "p.id = c.org_id" },
  { child: "blob_chunks", columns: "org_id, blob_hash", parent: "blobs", on: "p.org_id = c.org_id AND p.hash = c.blob_hash" },
  { child: "repo_blobs", columns: "repo_id", parent: "repositories", on: "p.id = c.repo_id" },
  { child: "repo_trees", columns: "repo_id", parent: "repositories", on: "p.id = c.repo_id" },
  { child: "object_uploads", columns: "repo_id", parent: "repositories", on: "p.id = c.repo_id" }
]

/** The parents' keys, which the references name. */
const parentKeys: ReadonlyArray<{ parent: string; columns: string }> = [
  { parent: "organizations", columns: "id" },
  { parent: "repositories", columns: "id" },
  { parent: "blobs", columns: "org_id, hash" }
]

// OR REPLACE, IF EXISTS: applying it again (a data dir whose later migration rows were reset) changes nothing.
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // TG_ARGV: the parent table, the new rows' columns naming it, the join of those (c) with the parent (p).
  // EXECUTE: planned per statement with the transition table's real row count.
  yield* sql`CREATE OR REPLACE FUNCTION grove_parents_exist() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      wanted bigint;
      held bigint;
    BEGIN
      EXECUTE format('SELECT count(*) FROM (SELECT DISTINCT %s FROM new_rows) c', TG_ARGV[1]) INTO wanted;
      EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %I p JOIN (SELECT DISTINCT %s FROM new_rows) c ON %s FOR KEY SHARE OF p) x',
        TG_ARGV[0], TG_ARGV[1], TG_ARGV[2]) INTO held;
      IF held < wanted THEN
        RAISE EXCEPTION 'insert into % names a row of % that does not exist', TG_TABLE_NAME, TG_ARGV[0]
          USING ERRCODE = 'foreign_key_violation';
      END IF;
      RETURN NULL;
    END $$`
  // TG_ARGV: the child table, the join of its rows (c) with the deleted rows (p).
  yield* sql`CREATE OR REPLACE FUNCTION grove_delete_children() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      EXECUTE format('DELETE FROM %I c USING old_rows p WHERE %s', TG_ARGV[0], TG_ARGV[1]);
      RETURN NULL;
    END $$`
  yield* sql`CREATE OR REPLACE FUNCTION grove_key_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'the key of a row of % cannot change (rows of other tables name it)', TG_TABLE_NAME
        USING ERRCODE = 'foreign_key_violation';
    END $$`
  const changed = (columns: string) =>
    columns.split(", ").map((c) => `OLD.${c} IS DISTINCT FROM NEW.${c}`).join(" OR ")
  for (const r of references) {
    yield* sql.unsafe(`ALTER TABLE ${r.child} DROP CONSTRAINT IF EXISTS ${r.child}_${r.columns.replace(", ", "_")}_fkey`)
    yield* sql.unsafe(`CREATE OR REPLACE TRIGGER ${r.child}_parents AFTER INSERT ON ${r.child} REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION grove_parents_exist('${r.parent}', '${r.columns}', '${r.on}')`)
    yield* sql.unsafe(`CREATE OR REPLACE TRIGGER ${r.parent}_delete_${r.child} AFTER DELETE ON ${r.parent} REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION grove_delete_children('${r.child}', '${r.on}')`)
    yield* sql.unsafe(`CREATE OR REPLACE TRIGGER ${r.child}_reference_fixed AFTER UPDATE OF ${r.columns} ON ${r.child}
      FOR EACH ROW WHEN (${changed(r.columns)}) EXECUTE FUNCTION grove_key_fixed()`)
  }
  for (const k of parentKeys) {
    yield* sql.unsafe(`CREATE OR REPLACE TRIGGER ${k.parent}_key_fixed AFTER UPDATE OF ${k.columns} ON ${k.parent}
      FOR EACH ROW WHEN (${changed(k.columns)}) EXECUTE FUNCTION grove_key_fixed()`)
  }
})
