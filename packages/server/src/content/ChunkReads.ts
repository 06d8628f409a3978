/**
 * Reading many chunks as a stream: a blob's chunks in order, or a fetch's list in request order, in bounded groups
 * (small chunks of one pack in one range read), so memory stays bounded whatever the total.
 */
import { Effect, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { inBatches } from "../db/Batches.ts"
import type { ChunkLocation, ChunkReadError, ChunkStore } from "./ChunkStore.ts"

/**
 * Where the chunks of `hashes` are that a blob of the repository reaches (in its organization): a fetch's access check
 * and its locate in one statement per slice. The reached hashes are one array (an InitPlan, computed once) whose
 * repo_blobs probe uses both key columns (the repository joins as a row, as UploadGrants' `present`); the chunks are
 * then probed by organization and that array. On statistics taken before the organization's rows arrived, the join
 * form (`JOIN repo_blobs rb ON rb.repo_id = $repo ...`) probed repo_blobs by repository only, per chunk: n² (1,500
 * chunks 27x the CPU of 250, StaleStatistics.test); correlated forms (EXISTS per hash) were plan-proof only with every
 * subquery fenced and cost ~2x in the usual case.
 */
export const locateReachable = Effect.fnUntraced(function*(repoId: string, orgId: string, hashes: ReadonlyArray<string>) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* inBatches([...new Set(hashes)], (slice) =>
    sql<{ hash: string; size: string; pack: string | null; pack_offset: string | null }>`
      SELECT c.hash, c.size::text AS size, c.pack, c.pack_offset::text AS pack_offset FROM chunks c
      WHERE c.org_id = ${orgId} AND c.hash = ANY(ARRAY(
        SELECT bc.chunk_hash FROM blob_chunks bc, unnest(ARRAY[${repoId}]::uuid[]) r(id)
        WHERE bc.org_id = ${orgId} AND bc.chunk_hash = ANY(${slice}::text[])
        AND EXISTS (SELECT 1 FROM repo_blobs rb WHERE rb.repo_id = r.id AND rb.blob_hash = bc.blob_hash)))`)
  const out = new Map<string, ChunkLocation>()
  for (const r of rows) out.set(r.hash, { hash: r.hash, size: Number(r.size), pack: r.pack, offset: Number(r.pack_offset ?? 0) })
  return out as ReadonlyMap<string, ChunkLocation>
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
