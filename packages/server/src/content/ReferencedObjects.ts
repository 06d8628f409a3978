/**
 * What a publishing transaction makes reachable must still be stored when it commits. A push is
 * prepared (objects checked, uploaded, deduplicated) before its command publishes it; gc's sweep
 * (housekeeping/Gc.ts) may delete an object in between: one whose mark came due while the command
 * waited on the bus, or one swept in the moment it was uploaded again. So the publishing transaction
 * locks the blob rows it references and their chunk rows FOR KEY SHARE, in bulk, and refuses the push
 * (retryable: the client uploads what is missing again) when any is gone. The sweep takes its rows FOR
 * UPDATE SKIP LOCKED before its last check: it skips rows a publisher holds, and a publisher that waits
 * on a sweep finds the rows it deleted gone. FOR KEY SHARE, not FOR SHARE: it does not conflict with
 * the `referenced` updates two pushes of the same new blob make, so they do not deadlock.
 */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"

/** Objects the push relies on are no longer stored (gc removed them after its preparation); nothing was published. */
export class ObjectsMissing extends Schema.TaggedError<ObjectsMissing>()("ObjectsMissing", { message: Schema.String }) {}

/** Locks the blobs `hashes` and every chunk they map to; fails with ObjectsMissing when one of them is gone. */
export const lockReferenced = Effect.fnUntraced(function*(orgId: string, hashes: ReadonlyArray<string>) {
  const sql = yield* SqlClient.SqlClient
  const blobs = [...new Set(hashes)]
  if (blobs.length === 0) return
  // Counts only: a 20,000-blob push locks 20,000 rows without sending them back.
  const [counted] = yield* sql<{ blobs: string; chunks: string; wanted: string }>`WITH
    b AS (SELECT hash FROM blobs WHERE org_id = ${orgId} AND hash = ANY(${blobs}::text[]) FOR KEY SHARE),
    wanted AS (SELECT DISTINCT chunk_hash FROM blob_chunks WHERE org_id = ${orgId} AND blob_hash IN (SELECT hash FROM b)),
    c AS (SELECT hash FROM chunks WHERE org_id = ${orgId} AND hash IN (SELECT chunk_hash FROM wanted) FOR KEY SHARE)
    SELECT (SELECT count(*) FROM b)::text AS blobs, (SELECT count(*) FROM c)::text AS chunks, (SELECT count(*) FROM wanted)::text AS wanted`
  const missingBlobs = blobs.length - Number(counted?.blobs ?? 0)
  const missingChunks = Number(counted?.wanted ?? 0) - Number(counted?.chunks ?? 0)
  if (missingBlobs === 0 && missingChunks === 0) return
  // The failure path only: name one missing object for the message.
  const example = yield* sql<{ hash: string }>`SELECT g.hash FROM unnest(${blobs}::text[]) AS g(hash)
      WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.org_id = ${orgId} AND b.hash = g.hash)
    UNION ALL SELECT bc.chunk_hash FROM blob_chunks bc WHERE bc.org_id = ${orgId} AND bc.blob_hash = ANY(${blobs}::text[])
      AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.org_id = ${orgId} AND c.hash = bc.chunk_hash)
    LIMIT 1`
  return yield* new ObjectsMissing({
    message: `${missingBlobs + missingChunks} object(s) this push relies on are no longer stored (${example[0]?.hash ?? "removed"}): ` +
      "garbage collection removed them after the push was prepared"
  })
})
