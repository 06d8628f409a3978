/**
 * Upload grants (object_uploads): which stored objects count as present for a caller writing to a repository
 * (dedup, see DedupScope), and recording what the caller uploaded there, chunks in the statement that stores their
 * rows and holds off gc's sweep (ChunkUploads.ts). Statements of the ContentObjects service.
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { inBatches, plannedFor } from "../db/Batches.ts"
import { type ChunkRow, insertChunkRows } from "./ChunkStore.ts"

/**
 * What dedup may count as present for one caller writing to one repository: objects a repository the
 * caller (within its key's repository limit) can read reaches, and objects this caller uploaded to
 * such a repository. Anything else is missing and must be uploaded again (its bytes are still stored once).
 * In a repository whose path permissions withhold something from the caller, only blobs it may read at
 * a branch head count (and their chunks): a hash alone never grants content.
 */
export interface DedupScope {
  readonly orgId: string
  /** The repository written to: uploads are recorded against it. */
  readonly repoId: string
  /** `user:<id>` or `service_account:<id>`. */
  readonly principal: string
  /** Ids of the organization's repositories the caller can read (the written one among them). */
  readonly readable: ReadonlyArray<string>
  /** Of `readable`, those whose path permissions withhold something from the caller (usually none). */
  readonly restricted: ReadonlyArray<RestrictedRepository>
}

/** Who uploads, and to which repository: all that recording an upload needs. */
export type Uploader = Pick<DedupScope, "repoId" | "principal">

export interface RestrictedRepository {
  readonly repoId: string
  /** Whether the caller may read a path there (the policy of main's `.oak/PERMISSIONS`). */
  readonly canRead: (path: string) => boolean
  /** The blobs the caller may read at the repository's branch heads (computed once, when asked). */
  readonly readableBlobs: Effect.Effect<ReadonlySet<string>, SqlError>
}

export type ObjectKind = "chunk" | "blob" | "tree"

/** The organization's store of each kind: an upload counts only while its object is still stored. */
const STORED_TABLE: Record<ObjectKind, string> = { chunk: "chunks", blob: "blobs", tree: "trees" }

/** Rows written per statement where they go as arrays (unnest). */
export const REGISTER_BATCH = 5000

/** A grant older than 10 minutes is renewed: gc (housekeeping/Gc.ts) revokes the grants of objects idle past its grace. */
const RENEW_GRANT = "ON CONFLICT (repo_id, principal, hash) DO UPDATE SET created_at = now() WHERE object_uploads.created_at < now() - interval '10 minutes'"
/** A grant RENEW_GRANT would leave as it is (the complement of its WHERE). */
const FRESH_GRANT = "u.created_at >= now() - interval '10 minutes'"

export interface UploadGrants {
  /**
   * Of `hashes`, the stored objects of `kind` that count as present for the scope's caller (see DedupScope).
   * `stored`: the caller has just found every one of `hashes` stored, so the caller's uploads are not checked
   * against the store again.
   */
  readonly present: (kind: ObjectKind, scope: DedupScope, hashes: ReadonlyArray<string>, stored?: boolean) => Effect.Effect<Set<string>, SqlError>
  /**
   * Of `hashes`, the stored chunks the scope's caller uploaded to the scope's repository with a grant recordUploads
   * would leave as it is (fresh), and their sizes: present for the caller (what `present` finds through the caller's
   * own uploads), and granted already under the same hash. One statement per slice: a push's small blobs, each
   * uploaded as the one chunk carrying its hash, cost a lookup of the stored chunk and one of its grant, where
   * chunk sizes, `present` and `recordUploads` read them three times.
   */
  readonly freshChunkUploads: (scope: Pick<DedupScope, "orgId" | "repoId" | "principal">, hashes: ReadonlyArray<string>) => Effect.Effect<Map<string, number>, SqlError>
  /** Records that the scope's caller uploaded these objects (verified bytes, or verified trees and blob mappings) to its repository. */
  readonly recordUploads: (scope: Uploader, hashes: ReadonlyArray<string>) => Effect.Effect<void, SqlError>
  /**
   * `recordUploads` for stored chunks: each grant is recorded in the statement that locks its chunk row if gc
   * marked it (FOR KEY SHARE), so gc's sweep, which locks a row before its last check, either deleted the row
   * first or sees the grant. Answers the chunks whose row is gone (swept after the caller stored them): they
   * are not granted. `stored`: rows of chunks whose bytes were just written (ChunkStore.storeBytes), inserted
   * by the same statement.
   */
  readonly recordChunkUploads: (
    scope: Uploader,
    orgId: string,
    hashes: ReadonlyArray<string>,
    stored?: ReadonlyArray<ChunkRow>
  ) => Effect.Effect<ReadonlySet<string>, SqlError>
}

export const makeUploadGrants = (sql: SqlClient.SqlClient): UploadGrants => ({
  present: Effect.fnUntraced(function*(kind, scope, hashes, stored = false) {
    if (scope.readable.length === 0) return new Set<string>()
    const readable = [...scope.readable]
    const unique = [...new Set(hashes)]
    // Trees are sent whole to every reader (only blobs are withheld): a restricted repository's trees count.
    const restricted = kind === "tree" ? [] : scope.restricted
    const restrictedIds = new Set(restricted.map((r) => r.repoId))
    const whole = readable.filter((id) => !restrictedIds.has(id))
    // A chunk is reached through a blob of a repository: each repository id joins as a row (unnest), so both
    // keys of repo_blobs' index are the lookup. As `rb.repo_id = ANY(...)` the join key was a filter, and once
    // the tables were analyzed before a new organization's rows arrived (estimated at ~1 row) the plan was a
    // nested loop reading all the repository's rows per chunk: 6.6 s per 2,000-hash batch instead of ~20 ms.
    // The caller's uploads: the stored ones' hashes as one array (an InitPlan), no join. As `EXISTS (... o.hash =
    // u.hash)` it was a nested loop over the organization's stored rows times the uploads (9 s per batch). Known
    // stored (`stored`), the asked hashes themselves: PostgreSQL 15 compares every upload of the caller's against an
    // InitPlan's array unhashed (StaleStatistics.test: 1,500 chunks ~32 ms, 250 ~1 ms), a bound array it hashes (~2.5).
    const rows = yield* inBatches(unique, (slice) => {
      const reached = kind === "chunk"
        ? sql`SELECT bc.chunk_hash AS hash FROM blob_chunks bc, unnest(${whole}::uuid[]) r(id)
            WHERE bc.org_id = ${scope.orgId} AND bc.chunk_hash = ANY(${slice})
            AND EXISTS (SELECT 1 FROM repo_blobs rb WHERE rb.repo_id = r.id AND rb.blob_hash = bc.blob_hash)`
        : kind === "blob"
        ? sql`SELECT blob_hash AS hash FROM repo_blobs WHERE repo_id = ANY(${whole}::uuid[]) AND blob_hash = ANY(${slice})`
        : sql`SELECT tree_hash AS hash FROM repo_trees WHERE repo_id = ANY(${whole}::uuid[]) AND tree_hash = ANY(${slice})`
      const uploaded = stored ? sql`${slice}` : sql`ARRAY(SELECT o.hash FROM ${sql.literal(STORED_TABLE[kind])} o
            WHERE o.org_id = ${scope.orgId} AND o.hash = ANY(${slice}))`
      return sql<{ hash: string }>`${reached}
        UNION SELECT u.hash FROM object_uploads u WHERE u.repo_id = ANY(${readable}::uuid[]) AND u.principal = ${scope.principal}
          AND u.hash = ANY(${uploaded})`
    })
    const found = new Set(rows.map((r) => r.hash))
    const rest = unique.filter((h) => !found.has(h))
    if (restricted.length === 0 || rest.length === 0) return found
    // What only restricted repositories reach counts when its blob is readable there at a branch head;
    // the walk for that happens only when such a candidate exists (and is cached by heads).
    const ids = [...restrictedIds]
    const candidates = yield* inBatches(rest, (slice) =>
      kind === "chunk"
        ? sql<{ repo_id: string; hash: string; blob: string }>`SELECT DISTINCT r.id::text AS repo_id, bc.chunk_hash AS hash,
            bc.blob_hash AS blob FROM blob_chunks bc, unnest(${ids}::uuid[]) r(id)
            WHERE bc.org_id = ${scope.orgId} AND bc.chunk_hash = ANY(${slice})
            AND EXISTS (SELECT 1 FROM repo_blobs rb WHERE rb.repo_id = r.id AND rb.blob_hash = bc.blob_hash)`
        : sql<{ repo_id: string; hash: string; blob: string }>`SELECT repo_id::text AS repo_id, blob_hash AS hash, blob_hash AS blob
            FROM repo_blobs WHERE repo_id = ANY(${ids}::uuid[]) AND blob_hash = ANY(${slice})`)
    for (const repo of restricted) {
      const mine = candidates.filter((c) => c.repo_id === repo.repoId && !found.has(c.hash))
      if (mine.length === 0) continue
      const readableBlobs = yield* repo.readableBlobs
      for (const c of mine) if (readableBlobs.has(c.blob)) found.add(c.hash)
    }
    return found
  }),
  freshChunkUploads: Effect.fnUntraced(function*(scope, hashes) {
    // The grant and the chunk are each probed per hash (scalar subqueries, as recordUploads' probe, which the planner
    // cannot flatten): as a join or EXISTS it may read every grant of the caller's to the repository per slice, n² over
    // a push; as `c.hash = ANY(...)` with a filter, PostgreSQL 15 read all the organization's chunks per slice
    // (StaleStatistics.test: 1,000 hashes among 40,000 chunks cost 6x those among 1,000).
    const rows = yield* inBatches([...new Set(hashes)], (slice) =>
      sql<{ hash: string; size: string | null }>`SELECT g.hash,
          (SELECT c.size FROM chunks c WHERE c.org_id = ${scope.orgId} AND c.hash = g.hash)::text AS size
        FROM unnest(${slice}::text[]) AS g(hash)
        WHERE (SELECT true FROM object_uploads u WHERE u.repo_id = ${scope.repoId}::uuid AND u.principal = ${scope.principal}
          AND u.hash = g.hash AND ${sql.literal(FRESH_GRANT)} LIMIT 1) IS NOT NULL`)
    return new Map(rows.flatMap((r) => r.size === null ? [] : [[r.hash, Number(r.size)] as const]))
  }),
  recordUploads: Effect.fnUntraced(function*(scope, hashes) {
    const unique = [...new Set(hashes)].sort()
    // The hashes as one array (unnest): as VALUES each row took three bind parameters, a statement per 1,000.
    // A fresh grant is left out before the insert: ON CONFLICT would lock its row (a tuple write and a WAL
    // record) only to change nothing, and a push's small blobs were all granted by its chunk upload just before.
    // A probe per hash (a scalar subquery, which the planner cannot flatten): as NOT EXISTS it became a hash anti
    // join that read all the caller's grants to the repository for each slice, n² over a push (a first push of
    // 50,000 files on PGlite: 10 slices of 5,000, 6.1 s, the last one hashing the 45,000 grants of the others).
    for (let i = 0; i < unique.length; i += REGISTER_BATCH) {
      const slice = unique.slice(i, i + REGISTER_BATCH)
      yield* plannedFor(slice.length, sql`INSERT INTO object_uploads (repo_id, principal, hash)
        SELECT ${scope.repoId}::uuid, ${scope.principal}, h FROM unnest(${slice}::text[]) AS h
        WHERE (SELECT true FROM object_uploads u WHERE u.repo_id = ${scope.repoId}::uuid
          AND u.principal = ${scope.principal} AND u.hash = h AND ${sql.literal(FRESH_GRANT)} LIMIT 1) IS NULL
        ${sql.literal(RENEW_GRANT)}`)
    }
  }),
  recordChunkUploads: Effect.fnUntraced(function*(scope, orgId, hashes, stored = []) {
    const unique = [...new Set(hashes)]
    const rows = new Map(stored.map((r) => [r.hash, r]))
    const kept = new Set<string>()
    for (let i = 0; i < unique.length; i += 1000) {
      const slice = unique.slice(i, i + 1000)
      const fresh = slice.flatMap((h) => rows.get(h) ?? [])
      // Chunks whose rows this statement inserts are not looked up (a first push's batches are all such): a row
      // it inserts is not in its snapshot, so it counts as kept through `inserted`. One whose insert meets a row
      // another upload inserted meanwhile is not kept: answered gone, so the caller's next round finds it.
      const older = slice.filter((h) => !rows.has(h))
      // The rows of chunks just stored go in the same statement (one round trip per group of uploaded chunks, not
      // two). Only a marked row can be swept (content/ReferencedObjects.ts): those are locked, the rest just read.
      const keptRows = older.length === 0
        ? sql`SELECT hash FROM inserted`
        : sql`SELECT o.hash FROM chunks o WHERE o.org_id = ${orgId} AND o.hash = ANY(${older})
            AND NOT EXISTS (SELECT 1 FROM gc_marks m WHERE m.org_id = o.org_id AND m.kind = 'chunk' AND m.hash = o.hash)
          UNION ALL SELECT hash FROM marked UNION ALL SELECT hash FROM inserted`
      const found = yield* plannedFor(slice.length, sql<{ hash: string }>`WITH
        inserted AS (${fresh.length === 0 ? sql`SELECT NULL::text AS hash WHERE false` : sql`${insertChunkRows(sql, orgId, fresh)} RETURNING hash`}),
        ${older.length === 0 ? sql`` : sql`marked AS (SELECT o.hash FROM chunks o JOIN gc_marks m ON m.org_id = o.org_id AND m.kind = 'chunk' AND m.hash = o.hash
          WHERE o.org_id = ${orgId} AND o.hash = ANY(${older}) FOR KEY SHARE OF o),`}
        kept AS (${keptRows}),
        granted AS (INSERT INTO object_uploads (repo_id, principal, hash)
          SELECT ${scope.repoId}::uuid, ${scope.principal}, hash FROM kept ${sql.literal(RENEW_GRANT)})
        SELECT hash FROM kept`)
      for (const row of found) kept.add(row.hash)
    }
    return new Set(unique.filter((h) => !kept.has(h)))
  })
})
