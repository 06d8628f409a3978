/**
 * Rows of the content model: trees and blobs (per organization), commits and
 * what a repository's published commits reach (per repository). Reads and the
 * writes that may happen before a push command (objects only: nothing here
 * moves a branch).
 */
import type { ApiSync } from "@grove/api"
import * as Tree from "@grove/core/objects/Tree"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import { byHash, inBatches, plannedFor } from "../db/Batches.ts"
import { type ChunkRow, insertChunkRows } from "./ChunkStore.ts"
import { type CommitHeader, loadCommitHeaders } from "./CommitHeaders.ts"
import { makeRememberedTrees } from "./RememberedTrees.ts"

export interface BlobInfo {
  readonly hash: string
  readonly size: number
  readonly chunks: ReadonlyArray<{ readonly hash: string; readonly offset: number; readonly size: number }>
}

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

export interface CommitRow {
  readonly hash: string
  readonly branch_name: string
  readonly parent_hash: string | null
  readonly merge_parent_hash: string | null
  readonly manifest_hash: string
  readonly author: string
  readonly message: string | null
  readonly timestamp: string
  readonly files: ReadonlyArray<ApiSync.FileChangeData>
  readonly published: boolean
}

/** The wire form: optional fields omitted when empty, as the Oak client writes them. */
export const toCommitData = (c: CommitRow): ApiSync.CommitData => ({
  hash: c.hash,
  branch_name: c.branch_name,
  parent_hash: c.parent_hash,
  ...(c.merge_parent_hash === null ? {} : { merge_parent_hash: c.merge_parent_hash }),
  manifest_hash: c.manifest_hash,
  author: c.author,
  ...(c.message === null ? {} : { message: c.message }),
  timestamp: c.timestamp,
  files: c.files
})

export const toTreeData = (hash: string, entries: ReadonlyArray<Tree.TreeEntry>): ApiSync.TreeData => ({
  hash,
  entries: entries.map((e) => ({ name: e.name, kind: e.kind, hash: e.hash, mode: e.mode }))
})

/** A grant older than 10 minutes is renewed: gc (housekeeping/Gc.ts) revokes the grants of objects idle past its grace. */
const RENEW_GRANT = "ON CONFLICT (repo_id, principal, hash) DO UPDATE SET created_at = now() WHERE object_uploads.created_at < now() - interval '10 minutes'"
/** A grant RENEW_GRANT would leave as it is (the complement of its WHERE). */
const FRESH_GRANT = "u.created_at >= now() - interval '10 minutes'"

/** Rows written per statement where they go as arrays (unnest). */
const REGISTER_BATCH = 5000



export class ContentObjects extends Context.Service<ContentObjects, {
  /** Trees the organization has, parsed; hashes it lacks are absent from the map. */
  readonly loadTrees: (orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Map<string, ReadonlyArray<Tree.TreeEntry>>, SqlError>
  /**
   * `entries` (canonical order), when given, are kept for later loads (RememberedTrees) once the rows are
   * committed (at once outside a transaction; never when it rolls back).
   */
  readonly storeTrees: (
    orgId: string,
    trees: ReadonlyArray<{ readonly hash: string; readonly body: string; readonly entries?: ReadonlyArray<Tree.TreeEntry> }>
  ) => Effect.Effect<void, SqlError>
  /**
   * Trees stored by a statement of the caller's own (a merge's, sync's or revert's built trees, with their commit
   * row), kept for later loads as storeTrees keeps its own: the CI trigger reads a merge's root tree next. Kept
   * once the rows are committed (at once outside a transaction). `entries` in canonical order.
   */
  readonly rememberTrees: (orgId: string, trees: Iterable<readonly [string, ReadonlyArray<Tree.TreeEntry>]>) => Effect.Effect<void>
  /** Sizes of the blobs the organization has. */
  readonly blobSizes: (orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Map<string, number>, SqlError>
  readonly blobInfo: (orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Map<string, BlobInfo>, SqlError>
  readonly registerBlobs: (orgId: string, blobs: ReadonlyArray<BlobInfo>) => Effect.Effect<void, SqlError>
  readonly loadCommits: (repoId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Map<string, CommitRow>, SqlError>
  /** The same rows without `files`: what a commit changed can be as large as its tree (100,000 paths). */
  readonly loadCommitHeaders: (repoId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Map<string, CommitHeader>, SqlError>
  /** Stores commits unpublished; the push command publishes them. Existing rows are kept. */
  readonly stageCommits: (repoId: string, commits: ReadonlyArray<ApiSync.CommitData>) => Effect.Effect<void, SqlError>
  /** Bytes the organization's referenced chunks take, and its quota. */
  readonly orgUsage: (orgId: string) => Effect.Effect<{ readonly usedBytes: number; readonly quotaBytes: number }, SqlError>
  /** Of `hashes`, the chunks of blobs the repository's published commits reach (what its readers may download). */
  readonly readableChunks: (repoId: string, orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Set<string>, SqlError>
  /** Of `hashes`, each chunk with each blob of the repository's published commits that holds it. */
  readonly chunkBlobs: (repoId: string, orgId: string, hashes: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<{ readonly chunk: string; readonly blob: string }>, SqlError>
  /** Leaves a push's object lists for its command (too large for a bus message); answers the row id. */
  readonly stagePush: (repoId: string, body: { readonly trees: ReadonlyArray<string>; readonly blobs: ReadonlyArray<string> }) => Effect.Effect<string, SqlError>
  /** Of `hashes`, the trees already reached by the repository's published commits. */
  readonly repoTrees: (repoId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Set<string>, SqlError>
  /** Of `hashes`, the blobs the repository's published commits reach. */
  readonly repoBlobs: (repoId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Set<string>, SqlError>
  /** The organization's repositories, to decide which of them a caller can read. */
  readonly orgRepositories: (orgId: string) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly isPublic: boolean }>, SqlError>
  /** Of `hashes`, the stored objects of `kind` that count as present for the scope's caller (see DedupScope). */
  readonly present: (kind: ObjectKind, scope: DedupScope, hashes: ReadonlyArray<string>) => Effect.Effect<Set<string>, SqlError>
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
}>()("grove/server/content/ContentObjects") {
  static readonly layer = Layer.effect(ContentObjects, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const remembered = makeRememberedTrees()
    return ContentObjects.of({
      loadTrees: Effect.fnUntraced(function*(orgId, hashes) {
        const out = new Map<string, ReadonlyArray<Tree.TreeEntry>>()
        const unknown: Array<string> = []
        for (const hash of new Set(hashes)) {
          const entries = remembered.get(orgId, hash)
          if (entries === undefined) unknown.push(hash)
          else out.set(hash, entries)
        }
        if (unknown.length === 0) return out
        const rows = yield* inBatches(unknown, (slice) =>
          sql<{ hash: string; body: string }>`SELECT hash, body FROM trees WHERE org_id = ${orgId} AND hash = ANY(${slice})`)
        const found: Array<readonly [string, ReadonlyArray<Tree.TreeEntry>]> = []
        for (const row of rows) {
          const entries = Tree.decodeTree(row.body)
          // Stored bodies were verified on the way in; a bad one is treated as missing rather than trusted.
          if (entries === undefined) continue
          out.set(row.hash, entries)
          found.push([row.hash, entries])
        }
        // Inside a transaction a row may be one it wrote: kept only once that commits (a rolled-back tree is none).
        if (found.length > 0) yield* sql.afterCommit(Effect.sync(() => { for (const [hash, entries] of found) remembered.add(orgId, hash, entries) }))
        return out
      }),
      storeTrees: Effect.fnUntraced(function*(orgId, unsorted) {
        const trees = byHash(unsorted, (t) => t.hash)
        for (let i = 0; i < trees.length; i += REGISTER_BATCH) {
          const slice = trees.slice(i, i + REGISTER_BATCH)
          yield* plannedFor(slice.length, sql`INSERT INTO trees (org_id, hash, body)
            SELECT ${orgId}::uuid, t.hash, t.body FROM unnest(${slice.map((t) => t.hash)}::text[], ${slice.map((t) => t.body)}::text[]) AS t(hash, body)
            ON CONFLICT DO NOTHING`)
        }
        yield* sql.afterCommit(Effect.sync(() => { for (const t of trees) if (t.entries !== undefined) remembered.add(orgId, t.hash, t.entries) }))
      }),
      rememberTrees: (orgId, trees) => sql.afterCommit(Effect.sync(() => { for (const [hash, entries] of trees) remembered.add(orgId, hash, entries) })),
      blobSizes: Effect.fnUntraced(function*(orgId, hashes) {
        const rows = yield* inBatches([...new Set(hashes)], (slice) =>
          sql<{ hash: string; size: string }>`SELECT hash, size::text AS size FROM blobs WHERE org_id = ${orgId} AND hash = ANY(${slice})`)
        return new Map(rows.map((r) => [r.hash, Number(r.size)]))
      }),
      blobInfo: Effect.fnUntraced(function*(orgId, hashes) {
        const unique = [...new Set(hashes)]
        // The organization's id reaches the planner as an InitPlan's value, not a constant: with statistics taken
        // before a new organization's rows arrived, the constant was estimated at ~1 row, and blob_chunks was read by
        // its (org_id, chunk_hash) index on org_id alone, testing every row of the organization against each blob
        // (1.5 s for 1,500 blobs). Unseen, the id gets the average organization's share: both keys are the lookup.
        const rows = yield* inBatches(unique, (slice) =>
          sql<{ blob_hash: string; chunk_hash: string; byte_offset: string; size: string; blob_size: string }>`
            SELECT bc.blob_hash, bc.chunk_hash, bc.byte_offset::text AS byte_offset, bc.size::text AS size, b.size::text AS blob_size
            FROM blobs b JOIN blob_chunks bc ON bc.org_id = b.org_id AND bc.blob_hash = b.hash
            WHERE b.org_id = (SELECT ${orgId}::uuid) AND b.hash = ANY(${slice}) ORDER BY bc.blob_hash, bc.seq`)
        const out = new Map<string, { hash: string; size: number; chunks: Array<BlobInfo["chunks"][number]> }>()
        for (const row of rows) {
          let blob = out.get(row.blob_hash)
          if (blob === undefined) {
            blob = { hash: row.blob_hash, size: Number(row.blob_size), chunks: [] }
            out.set(row.blob_hash, blob)
          }
          blob.chunks.push({ hash: row.chunk_hash, offset: Number(row.byte_offset), size: Number(row.size) })
        }
        return out as Map<string, BlobInfo>
      }),
      registerBlobs: Effect.fnUntraced(function*(orgId, blobs) {
        const unique = byHash([...new Map(blobs.map((b) => [b.hash, b])).values()], (b) => b.hash)
        for (let i = 0; i < unique.length; i += REGISTER_BATCH) {
          const slice = unique.slice(i, i + REGISTER_BATCH)
          const chunks = slice.flatMap((b) => b.chunks.map((c, seq) => ({ blob: b.hash, seq, c })))
          // One statement: a blob row and its chunk rows appear together or not at all, and only a blob this
          // statement inserted gets chunk rows (one already there keeps its own). Columns go as arrays (unnest):
          // thousands of rows as VALUES cost a bind parameter each and an insert per 500 rows.
          yield* plannedFor(slice.length, sql`WITH
            inserted AS (INSERT INTO blobs (org_id, hash, size, chunk_count)
              SELECT ${orgId}::uuid, b.hash, b.size::int8, b.chunk_count::int4
              FROM unnest(${slice.map((b) => b.hash)}::text[], ${slice.map((b) => String(b.size))}::text[],
                ${slice.map((b) => String(b.chunks.length))}::text[]) AS b(hash, size, chunk_count)
              ON CONFLICT DO NOTHING RETURNING hash)
            INSERT INTO blob_chunks (org_id, blob_hash, seq, chunk_hash, byte_offset, size)
            SELECT ${orgId}::uuid, c.blob_hash, c.seq::int4, c.chunk_hash, c.byte_offset::int8, c.size::int8
            FROM unnest(${chunks.map((x) => x.blob)}::text[], ${chunks.map((x) => String(x.seq))}::text[],
              ${chunks.map((x) => x.c.hash)}::text[], ${chunks.map((x) => String(x.c.offset))}::text[],
              ${chunks.map((x) => String(x.c.size))}::text[]) AS c(blob_hash, seq, chunk_hash, byte_offset, size)
            JOIN inserted i ON i.hash = c.blob_hash`)
        }
      }),
      loadCommits: Effect.fnUntraced(function*(repoId, hashes) {
        const unique = [...new Set(hashes)]
        const rows = yield* inBatches(unique, (slice) =>
          sql<CommitRow>`SELECT hash, branch_name, parent_hash, merge_parent_hash, manifest_hash, author, message, timestamp, files, published
            FROM commits WHERE repo_id = ${repoId} AND hash = ANY(${slice})`)
        return new Map(rows.map((r) => [r.hash, { ...r, files: typeof r.files === "string" ? JSON.parse(r.files) : r.files }]))
      }),
      loadCommitHeaders: (repoId, hashes) => loadCommitHeaders(repoId, hashes).pipe(Effect.provideService(SqlClient.SqlClient, sql)),
      stageCommits: Effect.fnUntraced(function*(repoId, commits) {
        for (const c of commits) {
          yield* sql`INSERT INTO commits ${
            sql.insert({
              repo_id: repoId,
              hash: c.hash,
              branch_name: c.branch_name,
              parent_hash: c.parent_hash ?? null,
              merge_parent_hash: c.merge_parent_hash ?? null,
              manifest_hash: c.manifest_hash,
              author: c.author,
              message: c.message ?? null,
              timestamp: c.timestamp,
              files: JSON.stringify(c.files)
            })
          } ON CONFLICT DO NOTHING`
        }
      }),
      orgUsage: Effect.fnUntraced(function*(orgId) {
        const rows = yield* sql<{ used: string; quota: string }>`SELECT used_bytes::text AS used, quota_bytes::text AS quota
          FROM organizations WHERE id = ${orgId}`
        return { usedBytes: Number(rows[0]?.used ?? 0), quotaBytes: Number(rows[0]?.quota ?? 0) }
      }),
      readableChunks: Effect.fnUntraced(function*(repoId, orgId, hashes) {
        const rows = yield* inBatches([...new Set(hashes)], (slice) =>
          sql<{ chunk_hash: string }>`SELECT DISTINCT bc.chunk_hash FROM blob_chunks bc
            JOIN repo_blobs rb ON rb.repo_id = ${repoId} AND rb.blob_hash = bc.blob_hash
            WHERE bc.org_id = ${orgId} AND bc.chunk_hash = ANY(${slice})`)
        return new Set(rows.map((r) => r.chunk_hash))
      }),
      chunkBlobs: (repoId, orgId, hashes) =>
        inBatches([...new Set(hashes)], (slice) =>
          sql<{ chunk: string; blob: string }>`SELECT DISTINCT bc.chunk_hash AS chunk, bc.blob_hash AS blob FROM blob_chunks bc
            JOIN repo_blobs rb ON rb.repo_id = ${repoId} AND rb.blob_hash = bc.blob_hash
            WHERE bc.org_id = ${orgId} AND bc.chunk_hash = ANY(${slice})`),
      stagePush: Effect.fnUntraced(function*(repoId, body) {
        const id = randomUUID()
        yield* sql`INSERT INTO staged_pushes ${sql.insert({ id, repo_id: repoId, body: JSON.stringify(body) })}`
        return id
      }),
      repoTrees: Effect.fnUntraced(function*(repoId, hashes) {
        const rows = yield* inBatches([...new Set(hashes)], (slice) =>
          sql<{ tree_hash: string }>`SELECT tree_hash FROM repo_trees WHERE repo_id = ${repoId} AND tree_hash = ANY(${slice})`)
        return new Set(rows.map((r) => r.tree_hash))
      }),
      repoBlobs: Effect.fnUntraced(function*(repoId, hashes) {
        const rows = yield* inBatches([...new Set(hashes)], (slice) =>
          sql<{ blob_hash: string }>`SELECT blob_hash FROM repo_blobs WHERE repo_id = ${repoId} AND blob_hash = ANY(${slice})`)
        return new Set(rows.map((r) => r.blob_hash))
      }),
      orgRepositories: (orgId) =>
        sql<{ id: string; is_public: boolean }>`SELECT id::text AS id, is_public FROM repositories WHERE org_id = ${orgId}`.pipe(
          Effect.map((rows) => rows.map((r) => ({ id: r.id, isPublic: r.is_public === true })))
        ),
      present: Effect.fnUntraced(function*(kind, scope, hashes) {
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
        // u.hash)` it was a nested loop over the organization's stored rows times the uploads (9 s per batch).
        const rows = yield* inBatches(unique, (slice) => {
          const reached = kind === "chunk"
            ? sql`SELECT bc.chunk_hash AS hash FROM blob_chunks bc, unnest(${whole}::uuid[]) r(id)
                WHERE bc.org_id = ${scope.orgId} AND bc.chunk_hash = ANY(${slice})
                AND EXISTS (SELECT 1 FROM repo_blobs rb WHERE rb.repo_id = r.id AND rb.blob_hash = bc.blob_hash)`
            : kind === "blob"
            ? sql`SELECT blob_hash AS hash FROM repo_blobs WHERE repo_id = ANY(${whole}::uuid[]) AND blob_hash = ANY(${slice})`
            : sql`SELECT tree_hash AS hash FROM repo_trees WHERE repo_id = ANY(${whole}::uuid[]) AND tree_hash = ANY(${slice})`
          return sql<{ hash: string }>`${reached}
            UNION SELECT u.hash FROM object_uploads u WHERE u.repo_id = ANY(${readable}::uuid[]) AND u.principal = ${scope.principal}
              AND u.hash = ANY(ARRAY(SELECT o.hash FROM ${sql.literal(STORED_TABLE[kind])} o
                WHERE o.org_id = ${scope.orgId} AND o.hash = ANY(${slice})))`
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
      recordUploads: Effect.fnUntraced(function*(scope, hashes) {
        const unique = [...new Set(hashes)].sort()
        // The hashes as one array (unnest): as VALUES each row took three bind parameters, a statement per 1,000.
        // A fresh grant is left out before the insert: ON CONFLICT would lock its row (a tuple write and a WAL
        // record) only to change nothing, and a push's small blobs were all granted by its chunk upload just before.
        for (let i = 0; i < unique.length; i += REGISTER_BATCH) {
          const slice = unique.slice(i, i + REGISTER_BATCH)
          yield* plannedFor(slice.length, sql`INSERT INTO object_uploads (repo_id, principal, hash)
            SELECT ${scope.repoId}::uuid, ${scope.principal}, h FROM unnest(${slice}::text[]) AS h
            WHERE NOT EXISTS (SELECT 1 FROM object_uploads u WHERE u.repo_id = ${scope.repoId}::uuid
              AND u.principal = ${scope.principal} AND u.hash = h AND ${sql.literal(FRESH_GRANT)})
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
  }))
}
