/**
 * Reading many chunks as a stream: a blob's chunks in order, or a fetch's list in request order, in bounded groups
 * (small chunks of one pack in one range read), so memory stays bounded whatever the total.
 */
import { Effect, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { inBatches } from "../db/Batches.ts"
import { type ChunkLocation, type ChunkReadError, type ChunkStore, LOCATION_COLUMNS, type LocationRow, locationOf } from "./ChunkStore.ts"

/**
 * A chunk fetch's statements, plan-proof on stale statistics (StaleStatistics.test, PGlite and PostgreSQL 15): each is
 * driven by the asked hashes (`unnest`) and probes every index by its full key per hash, so its cost follows the
 * slice, never the organization's or the repository's size. Correlated forms the planner cannot flatten keep a probe
 * per row: a LATERAL with LIMIT or OFFSET 0 (not DISTINCT: that plan read blob_chunks in blob order, by organization),
 * and scalar subqueries (PostgreSQL pulls EXISTS up into a join; on statistics taken before an organization's rows
 * arrived it read repo_blobs by repository only, per chunk: n²). An array from an InitPlan (`= ANY(ARRAY(...))`) is a
 * runtime parameter: PostgreSQL 15 neither puts it in an index condition nor hashes it (every organization chunk
 * compared against the whole array).
 */
const reached = (sql: SqlClient.SqlClient, repoId: string, orgId: string) =>
  sql`(SELECT true FROM blob_chunks bc WHERE bc.org_id = ${orgId} AND bc.chunk_hash = a.hash
    AND (SELECT true FROM repo_blobs rb WHERE rb.repo_id = ${repoId} AND rb.blob_hash = bc.blob_hash) LIMIT 1)`

/**
 * `reached` for a chunk the organization stores: a small blob is one chunk whose hash is the blob's (sync-protocol.md,
 * Chunking), and a stored chunk that has the hash of one of the repository's blobs holds that blob's bytes, so one
 * repo_blobs probe by the chunk's own hash proves it (a clone's small files: 8 buffer hits a hash, not 11; 30 -> 23 ms
 * per 2,000 on PGlite). The blob_chunks path runs only when it misses (a large blob's chunks). Not for hashes that
 * may name no stored chunk (reachableChunks): a large blob's own hash would pass.
 */
const reachedStored = (sql: SqlClient.SqlClient, repoId: string, orgId: string) =>
  sql`((SELECT true FROM repo_blobs rb WHERE rb.repo_id = ${repoId} AND rb.blob_hash = a.hash) OR ${reached(sql, repoId, orgId)})`

/** Where the chunks of `hashes` are that a blob of the repository reaches (in its organization): a fetch's access check and its locate. */
export const locateReachable = Effect.fnUntraced(function*(repoId: string, orgId: string, hashes: ReadonlyArray<string>) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* inBatches([...new Set(hashes)], (slice) =>
    sql<LocationRow>`SELECT c.* FROM unnest(${slice}::text[]) a(hash)
      CROSS JOIN LATERAL (SELECT ${sql.literal(LOCATION_COLUMNS)} FROM chunks WHERE org_id = ${orgId} AND hash = a.hash LIMIT 1) c
      WHERE ${reachedStored(sql, repoId, orgId)}`)
  return new Map(rows.map((r) => [r.hash, locationOf(r)])) as ReadonlyMap<string, ChunkLocation>
})

/** Of `hashes`, those a blob of the repository reaches (in its organization). */
export const reachableChunks = Effect.fnUntraced(function*(repoId: string, orgId: string, hashes: ReadonlyArray<string>) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* inBatches([...new Set(hashes)], (slice) =>
    sql<{ hash: string }>`SELECT a.hash FROM unnest(${slice}::text[]) a(hash) WHERE ${reached(sql, repoId, orgId)}`)
  return new Set(rows.map((r) => r.hash))
})

/** The blobs of the repository that hold each of `hashes` (a chunk may be in several), as distinct pairs. */
export const chunkOwners = Effect.fnUntraced(function*(repoId: string, orgId: string, hashes: ReadonlyArray<string>) {
  const sql = yield* SqlClient.SqlClient
  return yield* inBatches([...new Set(hashes)], (slice) =>
    sql<{ chunk: string; blob: string }>`SELECT DISTINCT a.hash AS chunk, bc.blob FROM unnest(${slice}::text[]) a(hash)
      CROSS JOIN LATERAL (SELECT blob_hash AS blob FROM blob_chunks WHERE org_id = ${orgId} AND chunk_hash = a.hash OFFSET 0) bc
      WHERE (SELECT true FROM repo_blobs rb WHERE rb.repo_id = ${repoId} AND rb.blob_hash = bc.blob)`)
})

/** The bytes of a blob (or of any chunk list), chunk after chunk, in order: located in one query, then read one by one. */
export const readChunks = (
  store: ChunkStore["Service"],
  orgId: string,
  chunks: ReadonlyArray<{ readonly hash: string }>
): Stream.Stream<Uint8Array, ChunkReadError> =>
  Stream.unwrap(store.locate(orgId, chunks.map((c) => c.hash)).pipe(Effect.map((located) =>
    Stream.fromIterable(chunks).pipe(Stream.flatMap((c) => {
      const location = located.get(c.hash)
      // Not located: `read` lets the object store answer (ObjectNotFound when it lacks it too).
      return location === undefined ? store.read(orgId, c.hash) : store.readAt(orgId, location)
    }))
  )))

/** Bytes of chunks read per round trip when streaming many (a chunk larger than this is read alone). */
export const READ_GROUP_BYTES = 2 * 1024 * 1024

/**
 * The chunks of `hashes` in request order, read a group of at most READ_GROUP_BYTES at a time (small
 * ones of a pack in one range read), so memory stays bounded whatever the total. Hashes without a
 * location in `located` (not stored) are skipped.
 */
export const readInOrder = (
  store: ChunkStore["Service"],
  orgId: string,
  hashes: ReadonlyArray<string>,
  located: ReadonlyMap<string, ChunkLocation>
): Stream.Stream<{ readonly hash: string; readonly data: Uint8Array }, ChunkReadError> => {
  const groups: Array<Array<ChunkLocation>> = [[]]
  let bytes = 0
  for (const hash of hashes) {
    const location = located.get(hash)
    if (location === undefined) continue
    if (bytes + location.size > READ_GROUP_BYTES && groups.at(-1)!.length > 0) {
      groups.push([])
      bytes = 0
    }
    groups.at(-1)!.push(location)
    bytes += location.size
  }
  return Stream.fromIterable(groups).pipe(
    Stream.mapEffect((group) =>
      store.readLocated(orgId, group).pipe(Effect.map((found) =>
        group.flatMap(({ hash }) => {
          const data = found.get(hash)
          return data === undefined ? [] : [{ hash, data }]
        })
      ))
    ),
    Stream.flatMap((found) => Stream.fromIterable(found))
  )
}
