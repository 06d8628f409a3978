/**
 * Chunks: verified bytes, stored once per organization (the dedup boundary)
 * in the ObjectStore under the organization's namespace, with a `chunks` row
 * once they are stored. Small chunks (most files of a source tree) that arrive
 * together are written as one pack object (their bytes back to back, or as they
 * lay in the batch that brought them; named by its own hash) and found by offset,
 * so a push of 20,000 files is a few dozen object writes instead of 20,000 files
 * with two fsyncs each (and a few dozen S3 PUTs in cluster mode). Nothing is
 * stored under a hash its bytes do not have.
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import { plainChunkBytes } from "@grove/core/objects/ChunkCompression"
import { ObjectStore } from "@grove/storage"
import { Context, Effect, Layer, Schema, Stream } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { byHash, inBatches, plannedFor } from "../db/Batches.ts"

/** Bytes that do not hash to the hash they were sent under, or break a limit. */
export class ChunkRejected extends Schema.TaggedError<ChunkRejected>()("ChunkRejected", {
  hash: Schema.String,
  reason: Schema.String
}) {}

/** Reading several chunks of a pack: neighbours closer than SPAN_GAP are read together, up to SPAN_MAX per read. */
const SPAN_GAP = 64 * 1024
const SPAN_MAX = 1024 * 1024

/** Chunks up to this size that arrive together go into one pack object; larger ones are objects of their own. */
export const INLINE_MAX = 1024 * 1024
const MAX_PLAIN = 64 * 1024 * 1024

export const namespaceOf = (orgId: string) => orgId

export type ChunkStoreError = ObjectStore.ObjectStoreError | SqlError
export type ChunkReadError = ObjectStore.ObjectStoreError | ObjectStore.ObjectNotFound | SqlError

const verify = (hash: string, received: Uint8Array): Effect.Effect<Uint8Array, ChunkRejected> => {
  if (!Blake3.isHash(hash)) return Effect.fail(new ChunkRejected({ hash, reason: "a chunk hash must be 64 lowercase hex characters" }))
  const plain = plainChunkBytes(hash, received, MAX_PLAIN)
  return plain === undefined
    ? Effect.fail(new ChunkRejected({ hash, reason: `chunk ${hash}: the bytes do not hash to it (raw or zstd)` }))
    : Effect.succeed(plain)
}


/**
 * Small chunks' bytes back to back, copied once into a buffer of their total size. `new Uint8Array(Buffer.concat(...))`
 * copied each group twice (the concat, then the typed array's copy of it): 2 x ~40 MB per 5k-file push.
 */
export const packBytes = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  let total = 0
  for (const part of parts) total += part.length
  const bytes = new Uint8Array(total)
  let at = 0
  for (const part of parts) {
    bytes.set(part, at)
    at += part.length
  }
  return bytes
}

/**
 * The most bytes between two neighbouring chunks of a pack laid as they arrived (`asArrived`): a hashed frame's header
 * with the longest hash a frame may name (72 bytes for a 64-character hash). The parts must be views of the request's
 * own body (ChunkRoutes), so what lies between them is that body's frame headers, never other memory.
 */
const MAX_GAP = 8 + 128

/**
 * Small chunks as they lie in the body they arrived in, when that can be their pack: every one a view of the same
 * buffer, in order, with at most a frame's header between neighbours (bare frames 4 bytes, hashed ones 72). Then the
 * pack is that one view, headers between the chunks included (read by offset, they are never read as a chunk), and
 * nothing is copied: a zstd-encoded batch (grove's client) is one decoded buffer, its frames views of it. Undefined
 * when the chunks lie elsewhere (per-chunk zstd, frames across a stream's parts, a chunk left out between): then
 * `packBytes` copies them back to back.
 */
export const asArrived = (parts: ReadonlyArray<Uint8Array>): { readonly bytes: Uint8Array; readonly offsets: ReadonlyArray<number> } | undefined => {
  const first = parts[0]
  if (first === undefined) return undefined
  const offsets: Array<number> = []
  let end = first.byteOffset
  for (const part of parts) {
    if (part.buffer !== first.buffer || part.byteOffset < end || part.byteOffset - end > MAX_GAP) return undefined
    offsets.push(part.byteOffset - first.byteOffset)
    end = part.byteOffset + part.byteLength
  }
  return { bytes: new Uint8Array(first.buffer, first.byteOffset, end - first.byteOffset), offsets }
}

/** A received chunk: raw or zstd bytes sent under `hash`, or (`verified`) plain bytes `hash` was computed from. */
export interface UploadedChunk {
  readonly hash: string
  readonly data: Uint8Array
  readonly verified?: true
}

/** Where a stored chunk's bytes are: an object of its own (`pack` null), or `size` bytes at `offset` in a pack. */
export interface ChunkLocation {
  readonly hash: string
  readonly size: number
  readonly pack: string | null
  readonly offset: number
}

/** The columns of a `chunks` row that locate it (unqualified), their row and its ChunkLocation: locate's and ChunkReads'. */
export const LOCATION_COLUMNS = "hash, size::text AS size, pack, pack_offset::text AS pack_offset"
export interface LocationRow {
  readonly hash: string
  readonly size: string
  readonly pack: string | null
  readonly pack_offset: string | null
}
export const locationOf = (r: LocationRow): ChunkLocation => ({ hash: r.hash, size: Number(r.size), pack: r.pack, offset: Number(r.pack_offset ?? 0) })

/** A `chunks` row for bytes just stored: an object of its own (`pack` ""), or `size` bytes at `offset` in a pack. */
export interface ChunkRow {
  readonly hash: string
  readonly size: number
  readonly pack: string
  readonly offset: number
}

/**
 * The insert of stored chunks' rows (ON CONFLICT DO NOTHING), to run alone or as a CTE with `RETURNING hash`.
 * Columns as text arrays ('' for no pack): one statement, not VALUES with five bind parameters a row; in hash
 * order, as the other inserts with ON CONFLICT (byHash: opposite orders deadlock on PostgreSQL).
 */
export const insertChunkRows = (sql: SqlClient.SqlClient, orgId: string, unsorted: ReadonlyArray<ChunkRow>) => {
  const sorted = byHash(unsorted, (t) => t.hash)
  return sql`INSERT INTO chunks (org_id, hash, size, pack, pack_offset)
    SELECT ${orgId}::uuid, c.hash, c.size::int8, NULLIF(c.pack, ''), CASE WHEN c.pack = '' THEN NULL ELSE c.pack_offset::int8 END
    FROM unnest(${sorted.map((t) => t.hash)}::text[], ${sorted.map((t) => String(t.size))}::text[], ${sorted.map((t) => t.pack)}::text[],
      ${sorted.map((t) => String(t.offset))}::text[]) AS c(hash, size, pack, pack_offset)
    ON CONFLICT DO NOTHING`
}

export class ChunkStore extends Context.Service<ChunkStore, {
  /** Verifies and stores one received chunk (raw or zstd); a chunk the organization already has is not rewritten. */
  readonly put: (orgId: string, hash: string, received: Uint8Array) => Effect.Effect<{ readonly size: number }, ChunkRejected | ChunkStoreError>
  /**
   * Verifies every chunk first, then stores the new ones: small ones in one insert. An entry marked
   * `verified` is plain bytes whose hash the caller just took from them (bare frames): not hashed again.
   */
  readonly putMany: (
    orgId: string,
    entries: ReadonlyArray<UploadedChunk>
  ) => Effect.Effect<void, ChunkRejected | ChunkStoreError>
  /**
   * `putMany` without the rows: verifies every chunk, writes the bytes of the new ones and answers their rows for the
   * caller to insert (`insertChunkRows`), e.g. in the statement that grants them (ContentObjects.recordChunkUploads).
   */
  readonly storeBytes: (
    orgId: string,
    entries: ReadonlyArray<UploadedChunk>
  ) => Effect.Effect<ReadonlyArray<ChunkRow>, ChunkRejected | ChunkStoreError>
  /** The hashes the organization does not have, in request order. */
  readonly missing: (orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, SqlError>
  /** Sizes of the chunks the organization has. */
  readonly sizes: (orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, number>, SqlError>
  /** Where the chunks the organization has are (one query per 2,000): what reading them needs, sizes included. */
  readonly locate: (orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, ChunkLocation>, SqlError>
  readonly read: (orgId: string, hash: string) => Stream.Stream<Uint8Array, ChunkReadError>
  /** The bytes of a located chunk, without another query. */
  readonly readAt: (orgId: string, location: ChunkLocation) => Stream.Stream<Uint8Array, ChunkReadError>
  /** The bytes of located chunks: neighbours in a pack are read as one range. */
  readonly readLocated: (orgId: string, locations: ReadonlyArray<ChunkLocation>) => Effect.Effect<Map<string, Uint8Array>, ChunkReadError>
}>()("grove/server/content/ChunkStore") {
  static readonly layer = Layer.effect(ChunkStore, Effect.gen(function*() {
    const store = yield* ObjectStore.ObjectStore
    const sql = yield* SqlClient.SqlClient

    const locate = Effect.fnUntraced(function*(orgId: string, hashes: ReadonlyArray<string>) {
      const out = new Map<string, ChunkLocation>()
      // A probe per hash (a LATERAL subquery with LIMIT 1, which the planner cannot flatten), as ChunkReads does: as
      // `hash = ANY(...)` PostgreSQL 15 read all the organization's chunks per slice once its statistics were taken
      // before the organization's rows arrived (StaleStatistics.test: 1,000 hashes among 40,000 chunks, 17x the CPU of
      // those among 1,000), and every chunk upload, chunks/check and push asks here.
      const rows = yield* inBatches([...new Set(hashes)], (slice) =>
        sql<LocationRow>`SELECT c.* FROM unnest(${slice}::text[]) AS a(hash)
          CROSS JOIN LATERAL (SELECT ${sql.literal(LOCATION_COLUMNS)} FROM chunks WHERE org_id = ${orgId} AND hash = a.hash LIMIT 1) c`)
      for (const r of rows) out.set(r.hash, locationOf(r))
      return out as ReadonlyMap<string, ChunkLocation>
    })

    const sizes = (orgId: string, hashes: ReadonlyArray<string>) =>
      Effect.map(locate(orgId, hashes), (found) => new Map([...found].map(([hash, location]) => [hash, location.size])) as ReadonlyMap<string, number>)

    /**
     * Writes the bytes of the chunks the organization does not have yet and answers their rows, not inserted:
     * the caller inserts them (`insertChunkRows`), on its own or in the statement that also grants them.
     */
    const storeBytes = Effect.fnUntraced(function*(orgId: string, chunks: ReadonlyArray<{ readonly hash: string; readonly data: Uint8Array }>) {
      const known = yield* sizes(orgId, chunks.map((c) => c.hash))
      const fresh = new Map<string, Uint8Array>()
      for (const c of chunks) if (!known.has(c.hash)) fresh.set(c.hash, c.data)
      const small = [...fresh].filter(([, data]) => data.length <= INLINE_MAX)
      const alone = small.length === 1 ? small : []
      const packed = small.length > 1 ? small : []
      const large = [...[...fresh].filter(([, data]) => data.length > INLINE_MAX), ...alone]
      // Bytes first, rows second: a row always points at stored bytes.
      yield* Effect.forEach(large, ([hash, data]) => store.put({ namespace: namespaceOf(orgId), hash }, Stream.make(data)), {
        concurrency: 4,
        discard: true
      })
      const rows: Array<ChunkRow> = []
      for (const [hash, data] of large) rows.push({ hash, size: data.length, pack: "", offset: 0 })
      if (packed.length > 0) {
        const parts = packed.map(([, data]) => data)
        const laid = asArrived(parts)
        const bytes = laid?.bytes ?? packBytes(parts)
        const pack = Blake3.hash(bytes)
        yield* store.put({ namespace: namespaceOf(orgId), hash: pack }, Stream.make(bytes))
        let offset = 0
        for (const [i, [hash, data]] of packed.entries()) {
          rows.push({ hash, size: data.length, pack, offset: laid === undefined ? offset : laid.offsets[i]! })
          offset += data.length
        }
      }
      return rows as ReadonlyArray<ChunkRow>
    })

    const verifyAll = Effect.fnUntraced(function*(entries: ReadonlyArray<UploadedChunk>) {
      const verified: Array<{ hash: string; data: Uint8Array }> = []
      for (const entry of entries) {
        verified.push({ hash: entry.hash, data: entry.verified === true ? entry.data : yield* verify(entry.hash, entry.data) })
      }
      return verified
    })

    const storeNew = Effect.fnUntraced(function*(orgId: string, chunks: ReadonlyArray<{ readonly hash: string; readonly data: Uint8Array }>) {
      const rows = yield* storeBytes(orgId, chunks)
      if (rows.length > 0) yield* plannedFor(rows.length, insertChunkRows(sql, orgId, rows))
    })

    const fetch = (orgId: string, row: ChunkLocation): Effect.Effect<Uint8Array, ChunkReadError> =>
      row.pack === null
        ? Stream.runCollect(store.get({ namespace: namespaceOf(orgId), hash: row.hash })).pipe(
          Effect.map((parts) => {
            const list = Array.from(parts)
            return list.length === 1 ? list[0]! : new Uint8Array(Buffer.concat(list))
          })
        )
        : store.getRange({ namespace: namespaceOf(orgId), hash: row.pack }, row.offset, row.size)

    const readLocated = Effect.fnUntraced(function*(orgId: string, locations: ReadonlyArray<ChunkLocation>) {
      const out = new Map<string, Uint8Array>()
      // Chunks of one pack that lie close together are read as one range and sliced: a clone reads
      // thousands of small chunks, mostly in the order they were packed.
      const spans: Array<{ pack: string; start: number; end: number; rows: Array<ChunkLocation> }> = []
      const byPack = new Map<string, Array<ChunkLocation>>()
      for (const row of locations) {
        if (row.pack === null) spans.push({ pack: "", start: 0, end: 0, rows: [row] })
        else byPack.set(row.pack, [...(byPack.get(row.pack) ?? []), row])
      }
      for (const [pack, rows] of byPack) {
        rows.sort((a, b) => a.offset - b.offset)
        for (const row of rows) {
          const start = row.offset
          const end = start + row.size
          const last = spans.at(-1)
          if (last !== undefined && last.pack === pack && start >= last.end && start - last.end <= SPAN_GAP && end - last.start <= SPAN_MAX) {
            last.end = end
            last.rows.push(row)
          } else spans.push({ pack, start, end, rows: [row] })
        }
      }
      yield* Effect.forEach(spans, (span) =>
        span.pack === ""
          ? fetch(orgId, span.rows[0]!).pipe(Effect.map((bytes) => void out.set(span.rows[0]!.hash, bytes)))
          : store.getRange({ namespace: namespaceOf(orgId), hash: span.pack }, span.start, span.end - span.start).pipe(
            Effect.map((bytes) => {
              for (const row of span.rows) {
                const at = row.offset - span.start
                out.set(row.hash, bytes.subarray(at, at + row.size))
              }
            })
          ), { concurrency: 4, discard: true })
      return out
    })

    const readAt = (orgId: string, location: ChunkLocation): Stream.Stream<Uint8Array, ChunkReadError> =>
      location.pack === null ? store.get({ namespace: namespaceOf(orgId), hash: location.hash }) : Stream.fromEffect(fetch(orgId, location))

    const read = (orgId: string, hash: string): Stream.Stream<Uint8Array, ChunkReadError> =>
      Stream.unwrap(
        locate(orgId, [hash]).pipe(
          Effect.map((found) => {
            const location = found.get(hash)
            // Not located: the object store answers (ObjectNotFound when it lacks it too).
            return location === undefined ? store.get({ namespace: namespaceOf(orgId), hash }) : readAt(orgId, location)
          })
        )
      )

    return ChunkStore.of({
      put: Effect.fnUntraced(function*(orgId, hash, received) {
        const plain = yield* verify(hash, received)
        yield* storeNew(orgId, [{ hash, data: plain }])
        return { size: plain.length }
      }),
      putMany: Effect.fnUntraced(function*(orgId, entries) {
        yield* storeNew(orgId, yield* verifyAll(entries))
      }),
      storeBytes: Effect.fnUntraced(function*(orgId, entries) {
        return yield* storeBytes(orgId, yield* verifyAll(entries))
      }),
      missing: Effect.fnUntraced(function*(orgId, hashes) {
        const have = yield* sizes(orgId, hashes)
        return hashes.filter((h) => !have.has(h))
      }),
      sizes,
      locate,
      read,
      readAt,
      readLocated
    })
  }))
}
