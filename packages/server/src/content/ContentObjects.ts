/**
 * Rows of the content model: trees and blobs (per organization), commits and
 * what a repository's published commits reach (per repository). Reads and the
 * writes that may happen before a push command (objects only: nothing here
 * moves a branch). Dedup and upload grants are UploadGrants.ts's statements.
 */
import type { ApiSync } from "@grove/api"
import * as Tree from "@grove/core/objects/Tree"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import { byHash, inBatches, plannedFor } from "../db/Batches.ts"
import { type CommitHeader, loadCommitHeaders } from "./CommitHeaders.ts"
import { makeRememberedTrees } from "./RememberedTrees.ts"
import { makeUploadGrants, REGISTER_BATCH, type UploadGrants } from "./UploadGrants.ts"

export interface BlobInfo {
  readonly hash: string
  readonly size: number
  readonly chunks: ReadonlyArray<{ readonly hash: string; readonly offset: number; readonly size: number }>
}

export type { DedupScope, ObjectKind, RestrictedRepository, Uploader } from "./UploadGrants.ts"

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
  /** Leaves a push's object lists for its command (too large for a bus message); answers the row id. */
  readonly stagePush: (repoId: string, body: { readonly trees: ReadonlyArray<string>; readonly blobs: ReadonlyArray<string> }) => Effect.Effect<string, SqlError>
  /** Of `hashes`, the trees already reached by the repository's published commits. */
  readonly repoTrees: (repoId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Set<string>, SqlError>
  /** Of `hashes`, the blobs the repository's published commits reach. */
  readonly repoBlobs: (repoId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Set<string>, SqlError>
  /** The organization's repositories, to decide which of them a caller can read. */
  readonly orgRepositories: (orgId: string) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly isPublic: boolean }>, SqlError>
} & UploadGrants>()("grove/server/content/ContentObjects") {
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
      ...makeUploadGrants(sql)
    })
  }))
}
