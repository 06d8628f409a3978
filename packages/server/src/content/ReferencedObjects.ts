/**
 * What a publishing transaction makes reachable must still be stored when it commits. A push is
 * prepared (objects checked, uploaded, deduplicated) before its command publishes it; gc's sweep
 * (housekeeping/Gc.ts) may delete an object in between: one whose mark came due while the command
 * waited on the bus, or one swept in the moment it was uploaded again. So the publishing transaction
 * checks, in one statement, that every blob it references and every chunk of theirs is stored, locks
 * the ones gc marked FOR KEY SHARE, and refuses the push (retryable: the client uploads what is missing
 * again) when any is gone. The sweep takes its rows FOR
 * UPDATE SKIP LOCKED before its last check: it skips rows a publisher holds, and a publisher that waits
 * on a sweep finds the rows it deleted gone. FOR KEY SHARE, not FOR SHARE: it does not conflict with
 * the `referenced` updates two pushes of the same new blob make, so they do not deadlock.
 */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { plannedFor } from "../db/Batches.ts"

/** Objects the push relies on are no longer stored (gc removed them after its preparation); nothing was published. */
export class ObjectsMissing extends Schema.TaggedError<ObjectsMissing>()("ObjectsMissing", { message: Schema.String }) {}

/**
 * Only rows with a mark can be swept, and only once the mark is a grace period old: a row without a
 * visible mark cannot go before this transaction ends (it lasts seconds; the grace is an hour by
 * default), and a row a sweep is deleting still shows its mark until the sweep commits. So only marked
 * rows are locked (usually none: gc_marks is empty between runs), the rest are counted: a 20,000-blob
 * push does not take 40,000 row locks. The hashes are joined (unnest), not filtered with `= ANY`: a
 * filter over 20,000 values costs rows times values. When the organization has no mark at all (this statement's
 * snapshot: as if each row's NOT EXISTS were true), the stored rows are counted without asking gc_marks per row
 * (a 5,000-blob push asked 10,000 times); CASE evaluates only the branch it takes.
 */
const unmarked = (sql: SqlClient.SqlClient, kind: "blob" | "chunk", stored: string) =>
  sql`CASE WHEN (SELECT marked FROM org_marks) THEN (SELECT count(*) FROM ${sql.literal(stored)} o
    WHERE NOT EXISTS (SELECT 1 FROM gc_marks m WHERE m.org_id = o.org_id AND m.kind = ${kind} AND m.hash = o.hash))
    ELSE (SELECT count(*) FROM ${sql.literal(stored)}) END`
const locked = (sql: SqlClient.SqlClient, table: "blobs" | "chunks", source: string) =>
  sql`SELECT o.hash FROM ${sql.literal(source)} w JOIN ${sql(table)} o ON o.org_id = w.org_id AND o.hash = w.hash
    JOIN gc_marks m ON m.org_id = o.org_id AND m.kind = ${table === "blobs" ? "blob" : "chunk"} AND m.hash = o.hash FOR KEY SHARE OF o`

/**
 * Locks the blobs `hashes` and every chunk they map to where gc marked them; fails with ObjectsMissing when one of them
 * is gone. Answers the blobs' bytes (each hash once), which the publish's size accounting can take (BranchCommands).
 */
export const lockReferenced = Effect.fnUntraced(function*(orgId: string, hashes: ReadonlyArray<string>) {
  const sql = yield* SqlClient.SqlClient
  const blobs = [...new Set(hashes)]
  if (blobs.length === 0) return 0
  // Counts only: the push's hashes are not sent back. The stored blobs are found once (their count and bytes);
  // the stored chunks are counted in whichever branch runs.
  const [counts] = yield* plannedFor(blobs.length, sql<{ blobs: string; chunks: string; wanted: string; bytes: string }>`WITH
    pushed AS (SELECT ${orgId}::uuid AS org_id, hash FROM unnest(${blobs}::text[]) AS g(hash)),
    org_marks AS (SELECT EXISTS (SELECT 1 FROM gc_marks WHERE org_id = ${orgId}::uuid) AS marked),
    stored_blobs AS MATERIALIZED (SELECT o.org_id, o.hash, o.size FROM pushed w JOIN blobs o ON o.org_id = w.org_id AND o.hash = w.hash),
    marked_blobs AS (${locked(sql, "blobs", "pushed")}),
    wanted AS (SELECT DISTINCT bc.org_id, bc.chunk_hash AS hash FROM pushed p
      JOIN blob_chunks bc ON bc.org_id = p.org_id AND bc.blob_hash = p.hash),
    stored_chunks AS NOT MATERIALIZED (SELECT o.org_id, o.hash FROM wanted w JOIN chunks o ON o.org_id = w.org_id AND o.hash = w.hash),
    marked_chunks AS (${locked(sql, "chunks", "wanted")})
    SELECT (${unmarked(sql, "blob", "stored_blobs")} + (SELECT count(*) FROM marked_blobs))::text AS blobs,
      (${unmarked(sql, "chunk", "stored_chunks")} + (SELECT count(*) FROM marked_chunks))::text AS chunks,
      (SELECT count(*) FROM wanted)::text AS wanted,
      (SELECT coalesce(sum(size), 0) FROM stored_blobs)::text AS bytes`)
  const missingBlobs = blobs.length - Number(counts?.blobs ?? 0)
  const missingChunks = Number(counts?.wanted ?? 0) - Number(counts?.chunks ?? 0)
  if (missingBlobs === 0 && missingChunks === 0) return Number(counts?.bytes ?? 0)
  // The failure path only: name one missing object for the message.
  const example = yield* plannedFor(blobs.length, sql<{ hash: string }>`SELECT g.hash FROM unnest(${blobs}::text[]) AS g(hash)
      WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.org_id = ${orgId} AND b.hash = g.hash)
    UNION ALL SELECT bc.chunk_hash FROM unnest(${blobs}::text[]) AS p(hash)
      JOIN blob_chunks bc ON bc.org_id = ${orgId} AND bc.blob_hash = p.hash WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.org_id = ${orgId} AND c.hash = bc.chunk_hash)
    LIMIT 1`)
  return yield* new ObjectsMissing({
    message: `${missingBlobs + missingChunks} object(s) this push relies on are no longer stored (${example[0]?.hash ?? "removed"}): ` +
      "garbage collection removed them after the push was prepared"
  })
})
