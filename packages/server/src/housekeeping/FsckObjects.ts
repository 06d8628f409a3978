/**
 * fsck's object-store half: every object a row points at is read whole and must hash to its name —
 * chunks stored alone, packs (and each chunk inside them), blobs of several chunks (their chunks'
 * bytes in order hash to the blob), release binaries, CI logs and caches. Rows are read a page at
 * a time and objects `concurrency` at a time, so memory stays bounded however large the store.
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import { ObjectStore } from "@grove/storage"
import { Effect, Stream } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import type { Fragment } from "effect/sql/Statement"
import { type ChunkStore, namespaceOf } from "../content/ChunkStore.ts"
import { readChunks } from "../content/ChunkReads.ts"
import { RELEASE_NAMESPACE } from "../releases/Releases.ts"
import type { Counts, ObjectType, Problem } from "./FsckReport.ts"
import { algorithmOf, ciNamespace, makeVerifier, type Slice, type Verdict } from "./FsckVerify.ts"

export interface FsckContext {
  readonly sql: SqlClient.SqlClient
  readonly store: ObjectStore.ObjectStoreShape
  readonly chunks: ChunkStore["Service"]
  readonly counts: Counts
  readonly concurrency: number
  /** Rows per page (PAGE; fewer in tests, to walk many pages). */
  readonly page: number
  readonly report: (problem: Problem) => Effect.Effect<void>
  /** `org/hash` of chunks found missing or corrupt: blobs made of them are not re-read (the chunk is named already). */
  readonly badChunks: Set<string>
}

/** Rows per page of a keyset walk (objects of a page are read `concurrency` at a time). */
export const PAGE = 500

/**
 * Walks a query a page at a time: `fetch(after)` returns the rows after the last row's key, in key
 * order, at most `page` of them. Keys are compared as a row value (`(a, b) > (x, y)`), which PostgreSQL
 * turns into an index range; Keyset.after's OR form is not, and would rescan from the start each page.
 */
export const walk = <A, K>(
  page: number,
  fetch: (after: K | undefined) => Effect.Effect<ReadonlyArray<A>, SqlError>,
  keyOf: (row: A) => K,
  each: (rows: ReadonlyArray<A>) => Effect.Effect<void, SqlError>
): Effect.Effect<void, SqlError> =>
  Effect.gen(function*() {
    let after: K | undefined
    for (;;) {
      const rows = yield* fetch(after)
      if (rows.length > 0) yield* each(rows)
      if (rows.length < page) return
      after = keyOf(rows.at(-1)!)
    }
  })

/**
 * `(columns) > (after)`: the rows after the previous page's last key (`true` for the first page). The
 * first key part is cast to `first` (keys start with a uuid id, except where said).
 */
export const past = (
  sql: SqlClient.SqlClient,
  columns: string,
  after: ReadonlyArray<string> | undefined,
  first: "uuid" | "int8" | "text" = "uuid"
): Fragment =>
  after === undefined
    ? sql`true`
    : sql`(${sql.literal(columns)}) > (${
      sql.csv(after.map((value, i) => i === 0 && first !== "text" ? sql`CAST(${value} AS ${sql.literal(first)})` : sql`${value}`))
    })`

type Read = { readonly _tag: "Read"; readonly verdict: Verdict } | { readonly _tag: "NotFound" } | { readonly _tag: "Failed"; readonly message: string }

/** Reads an object whole through a verifier: its bytes never all in memory at once. */
const readObject = (ctx: FsckContext, key: ObjectStore.ObjectKey, slices: ReadonlyArray<Slice> = []): Effect.Effect<Read> =>
  Effect.gen(function*() {
    const algorithm = algorithmOf(key.namespace)
    const verifier = makeVerifier(algorithm, algorithm === "blake3" ? yield* Blake3.makeHasher : undefined, slices)
    yield* Stream.runForEach(ctx.store.get(key), (piece) => Effect.sync(() => verifier.feed(piece)))
    const verdict = verifier.finish()
    ctx.counts.objects++
    ctx.counts.bytes += verdict.size
    return { _tag: "Read", verdict } as Read
  }).pipe(
    Effect.catchTag("ObjectNotFound", () => Effect.succeed<Read>({ _tag: "NotFound" })),
    Effect.catchTag("ObjectStoreError", (error) => Effect.succeed<Read>({ _tag: "Failed", message: error.message }))
  )

/** What is wrong with an object read against its name and recorded size, if anything. */
const fault = (read: Read, name: string, size?: number): { readonly kind: Problem["kind"]; readonly detail: string } | undefined => {
  switch (read._tag) {
    case "NotFound":
      return { kind: "missing", detail: "not in the object store" }
    case "Failed":
      return { kind: "unreadable", detail: read.message }
    case "Read":
      if (read.verdict.hash !== name) return { kind: "corrupt", detail: `its ${read.verdict.size} bytes hash to ${read.verdict.hash}` }
      if (size !== undefined && read.verdict.size !== size) return { kind: "corrupt", detail: `${read.verdict.size} bytes stored, ${size} recorded` }
      return undefined
  }
}

/** Reports what reading an object whole found; true when it is sound. */
const judge = (
  ctx: FsckContext,
  read: Read,
  what: { readonly object: ObjectType; readonly name: string; readonly owner: string; readonly referencedBy: string; readonly size?: number }
): Effect.Effect<boolean> => {
  const found = fault(read, what.name, what.size)
  return found === undefined
    ? Effect.succeed(true)
    : Effect.as(ctx.report({ ...found, object: what.object, name: what.name, owner: what.owner, referencedBy: what.referencedBy }), false)
}

/** The blobs (up to 3) made of a chunk, and the repositories reaching each, for a problem's "referenced by". */
const chunkReferrers = (ctx: FsckContext, orgId: string, hash: string) =>
  Effect.map(
    ctx.sql<{ blob_hash: string; repos: string | null }>`
      SELECT bc.blob_hash, (SELECT string_agg(o.slug || '/' || r.name, ', ' ORDER BY r.name) FROM repositories r
          JOIN organizations o ON o.id = r.org_id JOIN repo_blobs rb ON rb.repo_id = r.id AND rb.blob_hash = bc.blob_hash
          WHERE r.org_id = bc.org_id) AS repos
      FROM blob_chunks bc WHERE bc.org_id = ${orgId} AND bc.chunk_hash = ${hash} ORDER BY bc.blob_hash LIMIT 3`,
    (rows) =>
      rows.length === 0
        ? "its chunks row (no blob uses it)"
        : rows.map((r) => `blob ${r.blob_hash}${r.repos === null ? "" : ` in ${r.repos}`}`).join(", ")
  )

const badChunk = (ctx: FsckContext, orgId: string, slug: string, hash: string, kind: Problem["kind"], detail: string) =>
  Effect.gen(function*() {
    ctx.badChunks.add(`${orgId}/${hash}`)
    yield* ctx.report({ kind, object: "chunk", name: hash, owner: slug, referencedBy: yield* chunkReferrers(ctx, orgId, hash), detail })
  })

/** Chunks stored as objects of their own: each read whole, hashed, and its size compared. */
export const checkLoneChunks = (ctx: FsckContext) =>
  walk(ctx.page,
    (after: readonly [string, string] | undefined) =>
      ctx.sql<{ org_id: string; slug: string; hash: string; size: string }>`
        SELECT c.org_id, o.slug, c.hash, c.size::text AS size FROM chunks c JOIN organizations o ON o.id = c.org_id
        WHERE c.pack IS NULL AND ${past(ctx.sql, "c.org_id, c.hash", after)}
        ORDER BY c.org_id, c.hash LIMIT ${ctx.page}`.unprepared,
    (row) => [row.org_id, row.hash] as const,
    (rows) =>
      Effect.forEach(rows, (row) =>
        Effect.gen(function*() {
          ctx.counts.chunks++
          const read = yield* readObject(ctx, { namespace: namespaceOf(row.org_id), hash: row.hash })
          const found = fault(read, row.hash, Number(row.size))
          if (found !== undefined) yield* badChunk(ctx, row.org_id, row.slug, row.hash, found.kind, found.detail)
        }), { concurrency: ctx.concurrency, discard: true })
  )

/** Packs per page: their chunk rows are held while the page's packs are read. */
const PACK_PAGE = 16

/**
 * Packs: each read whole once; the pack must hash to its name and every chunk at its offset to the
 * chunk's. (No index leads from a pack to its chunks, so each page of packs costs one scan of `chunks`.)
 */
export const checkPacks = (ctx: FsckContext) =>
  walk(Math.min(ctx.page, PACK_PAGE),
    (after: readonly [string, string] | undefined) =>
      ctx.sql<{ org_id: string; slug: string; pack: string }>`
        SELECT DISTINCT c.org_id, o.slug, c.pack FROM chunks c JOIN organizations o ON o.id = c.org_id
        WHERE c.pack IS NOT NULL AND ${past(ctx.sql, "c.org_id, c.pack", after)}
        ORDER BY c.org_id, c.pack LIMIT ${Math.min(ctx.page, PACK_PAGE)}`.unprepared,
    (row) => [row.org_id, row.pack] as const,
    (packs) =>
      Effect.gen(function*() {
        const rows = yield* ctx.sql<{ org_id: string; pack: string; hash: string; offset: string; size: string }>`
          SELECT org_id, pack, hash, pack_offset::text AS offset, size::text AS size FROM chunks
          WHERE (org_id, pack) IN (${ctx.sql.csv(packs.map((p) => ctx.sql`(${p.org_id}::uuid, ${p.pack})`))})`.unprepared
        const slices = new Map<string, Array<Slice>>()
        for (const r of rows) {
          const key = `${r.org_id}/${r.pack}`
          slices.set(key, [...(slices.get(key) ?? []), { hash: r.hash, offset: Number(r.offset), size: Number(r.size) }])
        }
        yield* Effect.forEach(packs, (pack) =>
          Effect.gen(function*() {
            const inside = slices.get(`${pack.org_id}/${pack.pack}`) ?? []
            ctx.counts.packs++
            ctx.counts.chunks += inside.length
            const read = yield* readObject(ctx, { namespace: namespaceOf(pack.org_id), hash: pack.pack }, inside)
            const referencedBy = `its ${inside.length} chunks (${inside.slice(0, 2).map((s) => s.hash).join(", ")}${inside.length > 2 ? ", ..." : ""})`
            const sound = yield* judge(ctx, read, { object: "pack", name: pack.pack, owner: pack.slug, referencedBy })
            // Its chunks cannot be read either: they are named too, so a damaged blob can be traced to them.
            if (!sound) for (const s of inside) ctx.badChunks.add(`${pack.org_id}/${s.hash}`)
            if (read._tag !== "Read") return
            for (const fault of read.verdict.faults) {
              yield* badChunk(
                ctx,
                pack.org_id,
                pack.slug,
                fault.slice.hash,
                "corrupt",
                fault.problem._tag === "Mismatch"
                  ? `its ${fault.slice.size} bytes at offset ${fault.slice.offset} of pack ${pack.pack} hash to ${fault.problem.computed}`
                  : `offset ${fault.slice.offset} + ${fault.slice.size} bytes lies outside pack ${pack.pack} (${read.verdict.size} bytes)`
              )
            }
          }), { concurrency: ctx.concurrency, discard: true })
      })
  )

/** Blobs of several chunks: the chunks' bytes, in order, must hash to the blob (one-chunk blobs are their chunk, checked above). */
export const checkLargeBlobs = (ctx: FsckContext) =>
  walk(ctx.page,
    (after: readonly [string, string] | undefined) =>
      ctx.sql<{ org_id: string; slug: string; hash: string; size: string }>`
        SELECT b.org_id, o.slug, b.hash, b.size::text AS size FROM blobs b JOIN organizations o ON o.id = b.org_id
        WHERE b.chunk_count > 1 AND ${past(ctx.sql, "b.org_id, b.hash", after)}
        ORDER BY b.org_id, b.hash LIMIT ${ctx.page}`.unprepared,
    (row) => [row.org_id, row.hash] as const,
    (rows) =>
      Effect.forEach(rows, (row) =>
        Effect.gen(function*() {
          const parts = yield* ctx.sql<{ chunk_hash: string }>`SELECT chunk_hash FROM blob_chunks
            WHERE org_id = ${row.org_id} AND blob_hash = ${row.hash} ORDER BY seq`
          if (parts.some((p) => ctx.badChunks.has(`${row.org_id}/${p.chunk_hash}`))) return
          const read = yield* Blake3.hashStream(readChunks(ctx.chunks, row.org_id, parts.map((p) => ({ hash: p.chunk_hash })))).pipe(
            Effect.map((found): Read => ({ _tag: "Read", verdict: { ...found, faults: [] } })),
            Effect.catchTag("ObjectNotFound", () => Effect.succeed<Read>({ _tag: "NotFound" })),
            Effect.catchTag("ObjectStoreError", (error) => Effect.succeed<Read>({ _tag: "Failed", message: error.message }))
          )
          ctx.counts.objects++
          if (read._tag === "Read") ctx.counts.bytes += read.verdict.size
          yield* judge(ctx, read, { object: "blob", name: row.hash, owner: row.slug, referencedBy: `its ${parts.length} chunks`, size: Number(row.size) })
        }), { concurrency: ctx.concurrency, discard: true })
  )

/** Release binaries (namespace `releases`, SHA-256). */
export const checkReleases = (ctx: FsckContext) =>
  walk(ctx.page,
    (after: readonly [string, string] | undefined) =>
      ctx.sql<{ version: string; platform: string; sha256: string; size: string }>`
        SELECT version, platform, sha256, size::text AS size FROM releases
        WHERE ${past(ctx.sql, "version, platform", after, "text")}
        ORDER BY version, platform LIMIT ${ctx.page}`.unprepared,
    (row) => [row.version, row.platform] as const,
    (rows) =>
      Effect.forEach(rows, (row) =>
        Effect.gen(function*() {
          ctx.counts.releases++
          const read = yield* readObject(ctx, { namespace: RELEASE_NAMESPACE, hash: row.sha256 })
          yield* judge(ctx, read, {
            object: "release",
            name: row.sha256,
            owner: RELEASE_NAMESPACE,
            referencedBy: `release ${row.version} ${row.platform}`,
            size: Number(row.size)
          })
        }), { concurrency: ctx.concurrency, discard: true })
  )

/** CI log pieces and cache archives (namespace `ci-<organization>`, SHA-256). */
export const checkCiObjects = (ctx: FsckContext) =>
  Effect.gen(function*() {
    yield* walk(ctx.page,
      (after: ReadonlyArray<string> | undefined) =>
        ctx.sql<{ id: string; org_id: string; slug: string; run_id: string; object_hash: string; bytes: number }>`
          SELECT l.id::text AS id, r.org_id, o.slug, l.run_id::text AS run_id, l.object_hash, l.bytes FROM ci_log_chunks l
          JOIN ci_runs cr ON cr.id = l.run_id JOIN repositories r ON r.id = cr.repo_id JOIN organizations o ON o.id = r.org_id
          WHERE ${past(ctx.sql, "l.id", after, "int8")} ORDER BY l.id LIMIT ${ctx.page}`.unprepared,
      (row) => [row.id],
      (rows) =>
        Effect.forEach(rows, (row) =>
          Effect.gen(function*() {
            ctx.counts.ciObjects++
            const read = yield* readObject(ctx, { namespace: ciNamespace(row.org_id), hash: row.object_hash })
            yield* judge(ctx, read, { object: "ci-log", name: row.object_hash, owner: row.slug, referencedBy: `CI run ${row.run_id}'s log`, size: row.bytes })
          }), { concurrency: ctx.concurrency, discard: true })
    )
    yield* walk(ctx.page,
      (after: readonly [string, string, string] | undefined) =>
        ctx.sql<{ repo_id: string; branch: string; cache_key: string; org_id: string; repo: string; slug: string; object_hash: string; bytes: string }>`
          SELECT c.repo_id, c.branch, c.cache_key, r.org_id, o.slug || '/' || r.name AS repo, o.slug, c.object_hash, c.bytes::text AS bytes
          FROM ci_caches c JOIN repositories r ON r.id = c.repo_id JOIN organizations o ON o.id = r.org_id
          WHERE ${past(ctx.sql, "c.repo_id, c.branch, c.cache_key", after)}
          ORDER BY c.repo_id, c.branch, c.cache_key LIMIT ${ctx.page}`.unprepared,
      (row) => [row.repo_id, row.branch, row.cache_key] as const,
      (rows) =>
        Effect.forEach(rows, (row) =>
          Effect.gen(function*() {
            ctx.counts.ciObjects++
            const read = yield* readObject(ctx, { namespace: ciNamespace(row.org_id), hash: row.object_hash })
            yield* judge(ctx, read, {
              object: "ci-cache",
              name: row.object_hash,
              owner: row.slug,
              referencedBy: `CI cache ${row.cache_key} of ${row.repo} on ${row.branch}`,
              size: Number(row.bytes)
            })
          }), { concurrency: ctx.concurrency, discard: true })
    )
  })
