/**
 * Garbage collection's marks (packages/server/src/housekeeping/Gc.ts). A blob or chunk that nothing
 * reaches is marked first, and its upload grants are revoked in the same transaction; it is swept only
 * when its mark is at least the grace period old and it is still unreferenced. No index is added to
 * chunks or upload grants for gc: every push writes them, and gc reads them in bulk (hash joins).
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
})
