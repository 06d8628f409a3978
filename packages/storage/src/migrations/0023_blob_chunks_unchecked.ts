/**
 * Inserting blob_chunks rows no longer looks up (and locks) their blobs: 0020's statement trigger did, for the one
 * statement that writes them, ContentObjects.registerBlobs, which inserts a blob's chunk rows only together with the
 * blob row itself, joined to the rows the same statement inserted (`inserted ... RETURNING`). Those blob rows are
 * uncommitted, seen by no other transaction, so none can delete them before the chunk rows commit: the lookup
 * could never miss, and its lock could never be needed. It cost ~35 ms of a 5k-file first push's ~130 ms
 * registerBlobs in PGlite (5,000 probes of blobs and as many tuple locks).
 * What stays: deleting a blob deletes its chunk rows (0020's cascade trigger), and their keys cannot change.
 * Both databases run the same SQL; IF EXISTS: applying it again changes nothing.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP TRIGGER IF EXISTS blob_chunks_parents ON blob_chunks`
})
