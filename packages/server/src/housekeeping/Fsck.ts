/**
 * `grove-server fsck`: every reference resolves to a stored object, and every stored object hashes
 * to its name (the sync protocol's BLAKE3, byte-exact; SHA-256 for releases and CI objects).
 *
 * References, from the top: branch heads -> commits (and their parents) -> root trees -> trees and
 * blobs -> chunk rows -> objects in the object store (a chunk alone, or a slice of a pack); what a
 * repository's published commits reach (`repo_trees`, `repo_blobs`); the objects an active staged
 * push holds; release binaries; CI log pieces and cache archives. Commits and trees live in the
 * database, in the exact text that was hashed, so they are re-hashed there; object-store objects are
 * read whole (FsckObjects.ts).
 *
 * Everything is walked a page at a time in key order, objects read `concurrency` at a time, and
 * problems reported as they are found: memory stays bounded however large the store. Run it against
 * a quiet store (gc paused): an object gc removes while fsck runs may be reported missing.
 */
import { checkCommit } from "@grove/core/objects/Commit"
import * as Blake3 from "@grove/core/objects/Blake3"
import { decodeTree } from "@grove/core/objects/Tree"
import { ObjectStore } from "@grove/storage"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { inBatches } from "../db/Batches.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import {
  checkCiObjects,
  checkLargeBlobs,
  checkLoneChunks,
  checkPacks,
  checkReleases,
  type FsckContext,
  PAGE,
  past,
  walk
} from "./FsckObjects.ts"
import { emptyCounts, type Problem, type ProblemKind, type Summary } from "./FsckReport.ts"

export interface FsckOptions {
  /** Objects read at once (default 8). */
  readonly concurrency?: number | undefined
  /** Rows per page (default PAGE); tests walk many small pages with 1. */
  readonly page?: number | undefined
}

const branchHeads = (ctx: FsckContext) =>
  walk(ctx.page,
    (after: readonly [string, string] | undefined) =>
      ctx.sql<{ repo_id: string; name: string; head: string; repo: string; found: boolean }>`
        SELECT b.repo_id, b.name, b.head, o.slug || '/' || r.name AS repo,
          EXISTS (SELECT 1 FROM commits c WHERE c.repo_id = b.repo_id AND c.hash = b.head) AS found
        FROM branches b JOIN repositories r ON r.id = b.repo_id JOIN organizations o ON o.id = r.org_id
        WHERE b.head IS NOT NULL AND ${past(ctx.sql, "b.repo_id, b.name", after)}
        ORDER BY b.repo_id, b.name LIMIT ${ctx.page}`.unprepared,
    (row) => [row.repo_id, row.name] as const,
    (rows) =>
      Effect.forEach(rows, (row) => {
        ctx.counts.branches++
        return row.found ? Effect.void : ctx.report({
          kind: "missing",
          object: "commit",
          name: row.head,
          owner: row.repo,
          referencedBy: `branch ${row.name}`,
          detail: "the branch head is not a stored commit"
        })
      }, { discard: true })
  )

/** Each commit re-hashed from its stored fields; its parents and root tree must be stored. */
const commits = (ctx: FsckContext) =>
  walk(ctx.page,
    (after: readonly [string, string] | undefined) =>
      ctx.sql<{
        repo_id: string
        repo: string
        slug: string
        hash: string
        branch_name: string
        parent_hash: string | null
        merge_parent_hash: string | null
        manifest_hash: string
        author: string
        message: string | null
        timestamp: string
        parent_found: boolean
        merge_parent_found: boolean
        tree_found: boolean
      }>`
        SELECT c.repo_id, o.slug || '/' || r.name AS repo, o.slug, c.hash, c.branch_name, c.parent_hash, c.merge_parent_hash,
          c.manifest_hash, c.author, c.message, c.timestamp,
          (c.parent_hash IS NULL OR EXISTS (SELECT 1 FROM commits p WHERE p.repo_id = c.repo_id AND p.hash = c.parent_hash)) AS parent_found,
          (c.merge_parent_hash IS NULL OR EXISTS (SELECT 1 FROM commits p WHERE p.repo_id = c.repo_id AND p.hash = c.merge_parent_hash)) AS merge_parent_found,
          EXISTS (SELECT 1 FROM trees t WHERE t.org_id = r.org_id AND t.hash = c.manifest_hash) AS tree_found
        FROM commits c JOIN repositories r ON r.id = c.repo_id JOIN organizations o ON o.id = r.org_id
        WHERE ${past(ctx.sql, "c.repo_id, c.hash", after)}
        ORDER BY c.repo_id, c.hash LIMIT ${ctx.page}`.unprepared,
    (row) => [row.repo_id, row.hash] as const,
    (rows) =>
      Effect.forEach(rows, (row) =>
        Effect.gen(function*() {
          ctx.counts.commits++
          const checked = checkCommit(row)
          if (!checked.ok) {
            yield* ctx.report({
              kind: checked.reason.startsWith("commit hash mismatch") ? "corrupt" : "malformed",
              object: "commit",
              name: row.hash,
              owner: row.repo,
              referencedBy: `its commits row (branch ${row.branch_name})`,
              detail: checked.reason
            })
          }
          const missing = (object: "commit" | "tree", name: string, owner: string, referencedBy: string) =>
            ctx.report({ kind: "missing", object, name, owner, referencedBy, detail: `not stored` })
          if (!row.parent_found) yield* missing("commit", row.parent_hash!, row.repo, `commit ${row.hash} (parent)`)
          if (!row.merge_parent_found) yield* missing("commit", row.merge_parent_hash!, row.repo, `commit ${row.hash} (merge parent)`)
          if (!row.tree_found) yield* missing("tree", row.manifest_hash, row.slug, `commit ${row.hash} of ${row.repo} (root tree)`)
        }), { discard: true })
  )

/** An entry of a tree: the tree and the entry's name. */
interface Entry {
  readonly tree: string
  readonly entry: string
}

/** Trees per page: their bodies are held while the page's entries are looked up. */
const TREE_PAGE = 200

/** Each tree's stored text must hash to its name and decode; the trees and blobs a tree some repository reaches names must be stored. */
const trees = (ctx: FsckContext) =>
  walk(Math.min(ctx.page, TREE_PAGE),
    (after: readonly [string, string] | undefined) =>
      ctx.sql<{ org_id: string; slug: string; hash: string; body: string }>`
        SELECT t.org_id, o.slug, t.hash, t.body FROM trees t JOIN organizations o ON o.id = t.org_id
        WHERE ${past(ctx.sql, "t.org_id, t.hash", after)}
        ORDER BY t.org_id, t.hash LIMIT ${Math.min(ctx.page, TREE_PAGE)}`.unprepared,
    (row) => [row.org_id, row.hash] as const,
    (rows) =>
      Effect.gen(function*() {
        // Per organization: each named child and the trees naming it.
        const wanted = new Map<string, { slug: string; trees: Map<string, Entry>; blobs: Map<string, Entry> }>()
        for (const row of rows) {
          ctx.counts.trees++
          const computed = Blake3.hash(row.body)
          if (computed !== row.hash) {
            yield* ctx.report({ kind: "corrupt", object: "tree", name: row.hash, owner: row.slug, referencedBy: "its trees row", detail: `its text hashes to ${computed}` })
          }
          const entries = decodeTree(row.body)
          if (entries === undefined) {
            yield* ctx.report({ kind: "malformed", object: "tree", name: row.hash, owner: row.slug, referencedBy: "its trees row", detail: "its text is not a canonical tree" })
            continue
          }
          const org = wanted.get(row.org_id) ?? { slug: row.slug, trees: new Map(), blobs: new Map() }
          wanted.set(row.org_id, org)
          for (const entry of entries) (entry.kind === "tree" ? org.trees : org.blobs).set(entry.hash, { tree: row.hash, entry: entry.name })
        }
        for (const [orgId, org] of wanted) {
          const missingIn: Array<{ readonly object: "tree" | "blob"; readonly hash: string; readonly tree: string; readonly entry: string }> = []
          for (const [table, object, names] of [["trees", "tree", org.trees], ["blobs", "blob", org.blobs]] as const) {
            const found = yield* inBatches([...names.keys()], (slice) =>
              ctx.sql<{ hash: string }>`SELECT hash FROM ${ctx.sql(table)} WHERE org_id = ${orgId} AND hash = ANY(${slice})`)
            const stored = new Set(found.map((r) => r.hash))
            for (const [hash, at] of names) if (!stored.has(hash)) missingIn.push({ object, hash, ...at })
          }
          if (missingIn.length === 0) continue
          // A tree no repository reaches any more (its repository was deleted: gc frees its blobs, not its
          // tree rows) may name what gc freed: garbage, not damage. Looked up only when something is missing.
          const reached = yield* inBatches([...new Set(missingIn.map((m) => m.tree))], (slice) =>
            ctx.sql<{ hash: string }>`SELECT DISTINCT rt.tree_hash AS hash FROM repo_trees rt
              JOIN repositories r ON r.id = rt.repo_id WHERE r.org_id = ${orgId} AND rt.tree_hash = ANY(${slice})`)
          const live = new Set(reached.map((r) => r.hash))
          for (const m of missingIn) {
            if (!live.has(m.tree)) continue
            yield* ctx.report({ kind: "missing", object: m.object, name: m.hash, owner: org.slug, referencedBy: `tree ${m.tree} (entry ${m.entry})`, detail: "not stored" })
          }
        }
      })
  )

/** What a repository's published commits reach (access and size accounting) must be stored. */
const reach = (ctx: FsckContext) =>
  Effect.forEach([["repo_trees", "tree_hash", "trees", "tree"], ["repo_blobs", "blob_hash", "blobs", "blob"]] as const, ([table, column, stored, object]) =>
    walk(ctx.page,
      (after: readonly [string, string] | undefined) =>
        ctx.sql<{ repo_id: string; hash: string; repo: string; slug: string }>`
          SELECT x.repo_id, x.${ctx.sql(column)} AS hash, o.slug || '/' || r.name AS repo, o.slug FROM ${ctx.sql(table)} x
          JOIN repositories r ON r.id = x.repo_id JOIN organizations o ON o.id = r.org_id
          WHERE NOT EXISTS (SELECT 1 FROM ${ctx.sql(stored)} s WHERE s.org_id = r.org_id AND s.hash = x.${ctx.sql(column)})
            AND ${past(ctx.sql, `x.repo_id, x.${column}`, after)}
          ORDER BY x.repo_id, x.${ctx.sql(column)} LIMIT ${ctx.page}`.unprepared,
      (row) => [row.repo_id, row.hash] as const,
      (rows) =>
        Effect.forEach(rows, (row) =>
          ctx.report({ kind: "missing", object, name: row.hash, owner: row.slug, referencedBy: `repository ${row.repo} (${table})`, detail: "not stored" }), {
          discard: true
        })
    ), { discard: true })

/** Blob rows against their chunk lists: count and sizes add up, a one-chunk blob is its chunk, every chunk has a row. */
const blobMappings = (ctx: FsckContext) =>
  walk(ctx.page,
    (after: readonly [string, string] | undefined) =>
      ctx.sql<{ org_id: string; slug: string; hash: string; size: string; chunk_count: number; n: number; total: string; first_chunk: string | null; unknown: number }>`
        SELECT b.org_id, o.slug, b.hash, b.size::text AS size, b.chunk_count, m.n, m.total, m.first_chunk, m.unknown
        FROM blobs b JOIN organizations o ON o.id = b.org_id
        CROSS JOIN LATERAL (
          SELECT count(*)::int AS n, coalesce(sum(bc.size), 0)::text AS total, min(bc.chunk_hash) AS first_chunk,
            (count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM chunks k WHERE k.org_id = bc.org_id AND k.hash = bc.chunk_hash)))::int AS unknown
          FROM blob_chunks bc WHERE bc.org_id = b.org_id AND bc.blob_hash = b.hash
        ) m
        WHERE ${past(ctx.sql, "b.org_id, b.hash", after)}
        ORDER BY b.org_id, b.hash LIMIT ${ctx.page}`.unprepared,
    (row) => [row.org_id, row.hash] as const,
    (rows) =>
      Effect.forEach(rows, (row) =>
        Effect.gen(function*() {
          ctx.counts.blobs++
          const malformed = (detail: string) =>
            ctx.report({ kind: "malformed", object: "blob", name: row.hash, owner: row.slug, referencedBy: "its blobs row", detail })
          if (row.n !== row.chunk_count || row.total !== row.size) {
            yield* malformed(`its chunk list has ${row.n} chunks of ${row.total} bytes; the row says ${row.chunk_count} of ${row.size}`)
          } else if (row.chunk_count === 1 && row.first_chunk !== row.hash) {
            yield* malformed(`a one-chunk blob must be its chunk, but its chunk is ${row.first_chunk}`)
          }
          if (row.unknown === 0) return
          const lost = yield* ctx.sql<{ chunk_hash: string }>`SELECT bc.chunk_hash FROM blob_chunks bc
            WHERE bc.org_id = ${row.org_id} AND bc.blob_hash = ${row.hash}
              AND NOT EXISTS (SELECT 1 FROM chunks k WHERE k.org_id = bc.org_id AND k.hash = bc.chunk_hash)`
          for (const { chunk_hash } of lost) {
            ctx.badChunks.add(`${row.org_id}/${chunk_hash}`)
            yield* ctx.report({ kind: "missing", object: "chunk", name: chunk_hash, owner: row.slug, referencedBy: `blob ${row.hash}`, detail: "no chunks row" })
          }
        }), { discard: true })
  )

/** Objects an active staged push holds (stored, unpublished) until its finalizer publishes them. */
const stages = (ctx: FsckContext) =>
  Effect.gen(function*() {
    const [active] = yield* ctx.sql<{ n: number }>`SELECT count(*)::int AS n FROM push_stages WHERE state = 'active'`
    ctx.counts.stages = active?.n ?? 0
    yield* walk(ctx.page,
      (after: readonly [string, string, string, string] | undefined) =>
        ctx.sql<{ repo_id: string; stage_id: string; kind: "commit" | "tree" | "blob"; hash: string; repo: string; slug: string }>`
          SELECT p.repo_id, p.stage_id, p.kind, p.hash, o.slug || '/' || r.name AS repo, o.slug
          FROM push_stage_objects p JOIN push_stages s ON s.repo_id = p.repo_id AND s.stage_id = p.stage_id
          JOIN repositories r ON r.id = p.repo_id JOIN organizations o ON o.id = r.org_id
          WHERE s.state = 'active' AND NOT CASE p.kind
              WHEN 'commit' THEN EXISTS (SELECT 1 FROM commits c WHERE c.repo_id = p.repo_id AND c.hash = p.hash)
              WHEN 'tree' THEN EXISTS (SELECT 1 FROM trees t WHERE t.org_id = r.org_id AND t.hash = p.hash)
              ELSE EXISTS (SELECT 1 FROM blobs b WHERE b.org_id = r.org_id AND b.hash = p.hash) END
            AND ${past(ctx.sql, "p.repo_id, p.stage_id, p.kind, p.hash", after)}
          ORDER BY p.repo_id, p.stage_id, p.kind, p.hash LIMIT ${ctx.page}`.unprepared,
      (row) => [row.repo_id, row.stage_id, row.kind, row.hash] as const,
      (rows) =>
        Effect.forEach(rows, (row) =>
          ctx.report({
            kind: "missing",
            object: row.kind,
            name: row.hash,
            owner: row.kind === "commit" ? row.repo : row.slug,
            referencedBy: `staged push ${row.stage_id} to ${row.repo}`,
            detail: "not stored"
          }), { discard: true })
    )
  })

/** Runs every check; `report` gets each problem as it is found. */
export const run = Effect.fn("Fsck.run")(function*(options: FsckOptions, report: (problem: Problem) => Effect.Effect<void>) {
  const started = Date.now()
  const problems: Record<ProblemKind, number> = { missing: 0, corrupt: 0, malformed: 0, unreadable: 0 }
  const ctx: FsckContext = {
    sql: yield* SqlClient.SqlClient,
    store: yield* ObjectStore.ObjectStore,
    chunks: yield* ChunkStore,
    counts: emptyCounts(),
    concurrency: Math.max(1, options.concurrency ?? 8),
    page: Math.max(1, options.page ?? PAGE),
    report: (problem) => Effect.andThen(Effect.sync(() => problems[problem.kind]++), report(problem)),
    badChunks: new Set()
  }
  const [repositories] = yield* ctx.sql<{ n: number }>`SELECT count(*)::int AS n FROM repositories`
  ctx.counts.repositories = repositories?.n ?? 0
  // References first (rows only), then the objects' bytes; blobs of several chunks last, so a blob
  // whose chunk was already named is not reported a second time.
  yield* branchHeads(ctx)
  yield* commits(ctx)
  yield* trees(ctx)
  yield* reach(ctx)
  yield* stages(ctx)
  yield* blobMappings(ctx)
  yield* checkLoneChunks(ctx)
  yield* checkPacks(ctx)
  yield* checkLargeBlobs(ctx)
  yield* checkReleases(ctx)
  yield* checkCiObjects(ctx)
  return { counts: ctx.counts, problems, durationMs: Date.now() - started } satisfies Summary
})
