/**
 * Garbage collection's marks (packages/server/src/housekeeping/Gc.ts). A blob or chunk that nothing
 * reaches is marked first, and its upload grants are revoked in the same transaction; it is swept only
 * when its mark is at least the grace period old and it is still unreferenced. Packs are found by
 * `chunks_pack`, so a pack object goes with its last chunk row.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE gc_marks (
    org_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('blob', 'chunk')),
    hash text NOT NULL,
    marked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, kind, hash)
  )`
  yield* sql`CREATE INDEX gc_marks_due ON gc_marks (marked_at)`
  yield* sql`CREATE INDEX chunks_pack ON chunks (org_id, pack) WHERE pack IS NOT NULL`
  yield* sql`CREATE INDEX object_uploads_hash ON object_uploads (hash)`
})
