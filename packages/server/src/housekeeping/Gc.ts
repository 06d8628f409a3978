/**
 * Garbage collection of content: blob and chunk rows no published commit and no live push reaches,
 * with their chunk and pack objects, and the staged push lists failed commands left behind.
 *
 * Why mark-and-sweep with a grace window, and not reference counts: a push takes many requests
 * (chunk uploads, object lists, the command) and dedups against whatever is stored, so a count kept
 * in the same transactions would have to be written on every upload and every dedup answer, on the
 * hot path of every push. Marks cost nothing until gc runs. How a run stays safe against pushes:
 *
 * - Live is: reached by a repository's published commits (repo_blobs), named by an active push stage,
 *   a staged push list or an unexpired blob proof, or granted to an uploader (object_uploads) within the
 *   grace period; a chunk is also live while any blob row maps it, or while younger than the grace.
 * - Mark: what is not live is marked, and in the same transaction its upload grants are revoked. From
 *   then on no dedup answer (ContentObjects.present) counts it as present except through a new upload
 *   (a new grant: live again) or a new publish (reached: live again).
 * - Sweep: a mark is due once it is `grace` old. Its row is locked first (FOR UPDATE SKIP LOCKED: a row
 *   a publishing push or an upload holds is left, with its mark, for a later run); then a statement of
 *   its own checks it again (any grant now counts, since the old ones are gone) and deletes it only if
 *   still not live; blobs before chunks, rows before objects, in one transaction that holds the rows'
 *   locks while the objects go.
 * - A push that got its dedup answer (or uploaded) before the mark usually publishes within the grace,
 *   i.e. before the mark is due: the sweep's check then sees it reached. One that got it after the mark
 *   got it from a new grant or a publish, which the check also sees. A repository deleted after a mark
 *   (which may take away what such a push relied on) restarts its organization's marks.
 * Two races are closed by locks rather than by the grace:
 * - A push whose command runs more than the grace after its preparation (held on the bus), or that was
 *   prepared against rows a sweep was deleting: its publishing transaction checks every blob it makes
 *   reachable and their chunks, locking the marked ones (FOR KEY SHARE, content/ReferencedObjects.ts:
 *   an unmarked row cannot be swept within a grace), and refuses the push,
 *   retryably (409 `objects_missing`), when one is gone; a push whose object list gc dropped is refused
 *   the same way. A sweep skips rows a publisher holds; a publisher waiting on a sweep sees its deletions.
 * - An upload of bytes whose row a sweep is deleting: the upload's grant is recorded in the statement
 *   that locks the chunk row if marked (ContentObjects.recordChunkUploads); it waits for the sweep, finds the row
 *   gone and stores the chunk again (content/ChunkUploads.ts), or the sweep, locking later, sees the grant.
 * In embedded mode (PGlite, one connection) a transaction holds the connection, so none interleave:
 * a sweep runs whole between two statements of a push or an upload, and the same checks apply.
 */
import { ObjectStore } from "@grove/storage"
import { Effect } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { namespaceOf } from "../content/ChunkStore.ts"
import { ciNamespace } from "./FsckVerify.ts"

/** Marks swept per transaction. */
const SWEEP_BATCH = 5000

export interface ContentReport {
  /** Staged push lists (too large for a bus message) whose command never took them. */
  readonly stagedPushes: number
  readonly marked: { readonly blobs: number; readonly chunks: number }
  /** Marks dropped because their object is reached or uploaded again. */
  readonly unmarked: number
  readonly freed: {
    readonly blobs: number
    readonly chunks: number
    /** Object-store objects deleted: chunks stored alone, and packs whose every chunk went. */
    readonly objects: number
    /** The freed chunks' bytes. */
    readonly bytes: number
    /** Of those, bytes the organizations' quotas had counted (their used bytes go down by this). */
    readonly usedBytes: number
    /** Namespaces of deleted organizations emptied (their objects are counted in `objects`). */
    readonly namespaces: number
  }
}

type Sql = SqlClient.SqlClient

/** Objects a repository's published commits reach, or a push in flight names (blob hashes, per organization). */
const liveBlobs = (sql: Sql) =>
  sql`SELECT r.org_id, rb.blob_hash AS hash FROM repo_blobs rb JOIN repositories r ON r.id = rb.repo_id
    UNION SELECT r.org_id, so.hash FROM push_stage_objects so
      JOIN push_stages s ON s.repo_id = so.repo_id AND s.stage_id = so.stage_id JOIN repositories r ON r.id = so.repo_id
      WHERE so.kind = 'blob' AND s.state = 'active' AND s.expires_at > now()
    UNION SELECT r.org_id, jsonb_array_elements_text(sp.body -> 'blobs') FROM staged_pushes sp JOIN repositories r ON r.id = sp.repo_id`

/** Chunks an unexpired blob proof lists (its blob is registered from them when it completes). */
const proofChunks = (sql: Sql) =>
  sql`SELECT r.org_id, e ->> 'hash' AS hash FROM blob_proof_pages p JOIN blob_proofs b ON b.token = p.token
    JOIN repositories r ON r.id = b.repo_id, jsonb_array_elements(p.chunks) e WHERE b.expires_at > now()`

/** Upload grants of the organization's repositories newer than `since` (ALWAYS: any). */
const granted = (sql: Sql, org: string, hash: string, since: Statement.Fragment) =>
  sql`EXISTS (SELECT 1 FROM object_uploads u JOIN repositories r ON r.id = u.repo_id
    WHERE r.org_id = ${sql.literal(org)} AND u.hash = ${sql.literal(hash)} AND u.created_at > ${since})`

/** Every grant, whenever made. */
const ALWAYS = (sql: Sql) => sql`'-infinity'::timestamptz`

interface Due {
  readonly org_id: string
  readonly hash: string
}

/**
 * The grace's cutoff on the database's clock (the transaction's now()), the clock that stamped the rows it is compared
 * with: a node's clock may differ from it, and Date.now()'s milliseconds fell behind now()'s microseconds within one
 * millisecond (a grace of 0 then spared a staged list written just before: GcRaces.test failed so in CI).
 */
const cutoffOf = (sql: Sql, graceMs: number) => sql`(now() - make_interval(secs => ${graceMs / 1000}))`

/** The object keys to delete for removed chunk rows: chunks stored alone, and packs no chunk row uses any more. */
const orphanedObjects = (sql: Sql, removed: ReadonlyArray<{ org_id: string; hash: string; pack: string | null }>) =>
  Effect.gen(function*() {
    const alone = removed.filter((r) => r.pack === null)
    const packs = [...new Map(removed.filter((r) => r.pack !== null).map((r) => [`${r.org_id}/${r.pack}`, { org_id: r.org_id, hash: r.pack! }])).values()]
    const candidates = [...alone.map((r) => ({ org_id: r.org_id, hash: r.hash })), ...packs]
    if (candidates.length === 0) return []
    // An object stays while any chunk row still reads it (as a pack, or as a chunk stored alone under the same hash).
    return yield* sql<Due>`SELECT g.org_id::text AS org_id, g.hash FROM unnest(${candidates.map((c) => c.org_id)}::uuid[], ${
      candidates.map((c) => c.hash)
    }::text[]) AS g(org_id, hash)
      WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.org_id = g.org_id AND c.pack = g.hash)
        AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.org_id = g.org_id AND c.hash = g.hash AND c.pack IS NULL)`.unprepared
  })

/**
 * Deletes objects whose rows are gone, answering those deleted. A failed delete leaves an object no row
 * names (space only) rather than rolling back to rows whose objects are partly gone, which a re-upload
 * would then dedup against.
 */
export const deleteObjects = (store: ObjectStore.ObjectStoreShape, keys: ReadonlyArray<ObjectStore.ObjectKey>) =>
  Effect.map(
    Effect.forEach(keys, (key) =>
      store.delete(key).pipe(
        Effect.as([key]),
        Effect.catch((error) => Effect.as(Effect.logWarning(`gc could not delete object ${key.namespace}/${key.hash}`, error), []))
      ), { concurrency: 8 }),
    (done) => done.flat()
  )

/** One kind's due marks (at most SWEEP_BATCH), locked; skipped when another node's gc holds them. */
const dueMarks = (sql: Sql, kind: "blob" | "chunk", graceMs: number) =>
  sql<Due & { marked_at: string }>`SELECT org_id::text AS org_id, hash, marked_at::text AS marked_at FROM gc_marks
    WHERE kind = ${kind} AND marked_at <= now() - make_interval(secs => ${graceMs / 1000})
    ORDER BY marked_at LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED`

const dropMarks = (sql: Sql, kind: "blob" | "chunk", marks: ReadonlyArray<Due>) =>
  marks.length === 0 ? Effect.void : sql`DELETE FROM gc_marks m USING unnest(${marks.map((m) => m.org_id)}::uuid[], ${
    marks.map((m) => m.hash)
  }::text[]) AS g(org_id, hash) WHERE m.org_id = g.org_id AND m.kind = ${kind} AND m.hash = g.hash`.unprepared.pipe(Effect.asVoid)

/**
 * The rows of due marks, locked FOR UPDATE; rows a publishing push or an upload holds (FOR KEY SHARE,
 * content/ReferencedObjects.ts, ContentObjects.recordChunkUploads) are skipped, their marks kept for a
 * later run. The check that follows is a statement of its own, so in PostgreSQL's READ COMMITTED it
 * sees whatever those holders committed before the lock was taken (a publish, a grant).
 */
const lockDue = (sql: Sql, table: "blobs" | "chunks", due: ReadonlyArray<Due & { marked_at: string }>) =>
  sql<Due & { marked_at: string }>`SELECT o.org_id::text AS org_id, o.hash, g.marked_at::text AS marked_at
    FROM ${sql(table)} o JOIN unnest(${due.map((d) => d.org_id)}::uuid[], ${due.map((d) => d.hash)}::text[], ${
    due.map((d) => d.marked_at)
  }::timestamptz[]) AS g(org_id, hash, marked_at) ON o.org_id = g.org_id AND o.hash = g.hash
    FOR UPDATE OF o SKIP LOCKED`.unprepared

/** Sweeps due blob marks: the blobs still not live lose their rows (and chunk mappings). */
const sweepBlobs = (sql: Sql, graceMs: number) =>
  sql.withTransaction(Effect.gen(function*() {
    const due = yield* dueMarks(sql, "blob", graceMs)
    if (due.length === 0) return { blobs: 0, unmarked: 0, more: false }
    const locked = yield* lockDue(sql, "blobs", due)
    const gone = locked.length === 0 ? [] : yield* sql<Due>`WITH due AS (SELECT * FROM unnest(${locked.map((d) => d.org_id)}::uuid[], ${
      locked.map((d) => d.hash)
    }::text[]) AS g(org_id, hash)),
      live AS (${liveBlobs(sql)})
      DELETE FROM blobs b USING due WHERE b.org_id = due.org_id AND b.hash = due.hash
        AND NOT EXISTS (SELECT 1 FROM live WHERE live.org_id = due.org_id AND live.hash = due.hash)
        AND NOT ${granted(sql, "b.org_id", "b.hash", ALWAYS(sql))}
      RETURNING b.org_id::text AS org_id, b.hash`.unprepared
    yield* dropMarks(sql, "blob", locked)
    return { blobs: gone.length, unmarked: locked.length - gone.length, more: due.length === SWEEP_BATCH && locked.length > 0 }
  }))

/** Sweeps due chunk marks: rows, then objects (inside the transaction), then the quota. */
const sweepChunks = (sql: Sql, store: ObjectStore.ObjectStoreShape, graceMs: number, dryRun: boolean) =>
  sql.withTransaction(Effect.gen(function*() {
    const due = yield* dueMarks(sql, "chunk", graceMs)
    const locked = due.length === 0 ? [] : yield* lockDue(sql, "chunks", due)
    if (locked.length === 0) return { chunks: 0, objects: 0, bytes: 0, usedBytes: 0, unmarked: 0, more: false }
    const removed = yield* sql<Due & { pack: string | null; size: string; referenced: boolean }>`WITH due AS (
        SELECT * FROM unnest(${locked.map((d) => d.org_id)}::uuid[], ${locked.map((d) => d.hash)}::text[], ${
      locked.map((d) => d.marked_at)
    }::timestamptz[]) AS g(org_id, hash, marked_at)),
      proofs AS (${proofChunks(sql)})
      DELETE FROM chunks c USING due WHERE c.org_id = due.org_id AND c.hash = due.hash
        AND c.created_at <= due.marked_at
        AND NOT EXISTS (SELECT 1 FROM blob_chunks bc WHERE bc.org_id = c.org_id AND bc.chunk_hash = c.hash)
        AND NOT EXISTS (SELECT 1 FROM proofs WHERE proofs.org_id = c.org_id AND proofs.hash = c.hash)
        AND NOT ${granted(sql, "c.org_id", "c.hash", ALWAYS(sql))}
      RETURNING c.org_id::text AS org_id, c.hash, c.pack, c.size::text AS size, c.referenced`.unprepared
    const found = yield* orphanedObjects(sql, removed)
    const objects = dryRun ? found : yield* deleteObjects(store, found.map((o) => ({ namespace: namespaceOf(o.org_id), hash: o.hash })))
    const charged = new Map<string, number>()
    for (const r of removed) if (r.referenced) charged.set(r.org_id, (charged.get(r.org_id) ?? 0) + Number(r.size))
    for (const [org, bytes] of charged) {
      yield* sql`UPDATE organizations SET used_bytes = GREATEST(0, used_bytes - ${bytes}) WHERE id = ${org}`
    }
    yield* dropMarks(sql, "chunk", locked)
    return {
      chunks: removed.length,
      objects: objects.length,
      bytes: removed.reduce((sum, r) => sum + Number(r.size), 0),
      usedBytes: [...charged.values()].reduce((a, b) => a + b, 0),
      unmarked: locked.length - removed.length,
      more: due.length === SWEEP_BATCH
    }
  }))

/**
 * Drops marks whose object is live again, marks what is not live, and revokes the marked objects' old
 * upload grants: all in one transaction (see the header for why the revocation goes with the mark).
 */
const mark = (sql: Sql, graceMs: number) =>
  sql.withTransaction(Effect.gen(function*() {
    const cutoff = cutoffOf(sql, graceMs)
    const liveAgain = yield* sql<{ n: string }>`WITH live AS (${liveBlobs(sql)}), proofs AS (${proofChunks(sql)}),
      gone AS (DELETE FROM gc_marks m WHERE
        (m.kind = 'blob' AND (EXISTS (SELECT 1 FROM live WHERE live.org_id = m.org_id AND live.hash = m.hash)
          OR ${granted(sql, "m.org_id", "m.hash", ALWAYS(sql))}))
        OR (m.kind = 'chunk' AND (EXISTS (SELECT 1 FROM proofs WHERE proofs.org_id = m.org_id AND proofs.hash = m.hash)
          OR ${granted(sql, "m.org_id", "m.hash", ALWAYS(sql))}
          OR EXISTS (SELECT 1 FROM blob_chunks bc WHERE bc.org_id = m.org_id AND bc.chunk_hash = m.hash
            AND NOT EXISTS (SELECT 1 FROM gc_marks b WHERE b.org_id = bc.org_id AND b.kind = 'blob' AND b.hash = bc.blob_hash))))
        -- A sweep keeps the marks of rows it could not lock; one whose row is gone since has nothing left to sweep.
        OR (m.kind = 'blob' AND NOT EXISTS (SELECT 1 FROM blobs o WHERE o.org_id = m.org_id AND o.hash = m.hash))
        OR (m.kind = 'chunk' AND NOT EXISTS (SELECT 1 FROM chunks o WHERE o.org_id = m.org_id AND o.hash = m.hash))
        RETURNING 1)
      SELECT count(*)::text AS n FROM gone`.unprepared
    const blobs = yield* sql<{ n: string }>`WITH live AS (${liveBlobs(sql)}),
      marked AS (INSERT INTO gc_marks (org_id, kind, hash)
        SELECT b.org_id, 'blob', b.hash FROM blobs b
        WHERE NOT EXISTS (SELECT 1 FROM live WHERE live.org_id = b.org_id AND live.hash = b.hash)
          AND NOT ${granted(sql, "b.org_id", "b.hash", cutoff)}
        ON CONFLICT DO NOTHING RETURNING 1)
      SELECT count(*)::text AS n FROM marked`.unprepared
    // A chunk is a candidate when only marked blobs map it (or none), it is older than the grace, and no one was granted it since.
    const chunks = yield* sql<{ n: string }>`WITH proofs AS (${proofChunks(sql)}),
      marked AS (INSERT INTO gc_marks (org_id, kind, hash)
        SELECT c.org_id, 'chunk', c.hash FROM chunks c
        WHERE c.created_at <= ${cutoff}
          AND NOT EXISTS (SELECT 1 FROM blob_chunks bc WHERE bc.org_id = c.org_id AND bc.chunk_hash = c.hash
            AND NOT EXISTS (SELECT 1 FROM gc_marks m WHERE m.org_id = bc.org_id AND m.kind = 'blob' AND m.hash = bc.blob_hash))
          AND NOT EXISTS (SELECT 1 FROM proofs WHERE proofs.org_id = c.org_id AND proofs.hash = c.hash)
          AND NOT ${granted(sql, "c.org_id", "c.hash", cutoff)}
        ON CONFLICT DO NOTHING RETURNING 1)
      SELECT count(*)::text AS n FROM marked`.unprepared
    // Revoked: a dedup answer no longer counts a marked object as present for its old uploaders (they upload it again).
    yield* sql`DELETE FROM object_uploads u USING repositories r, gc_marks m
      WHERE r.id = u.repo_id AND m.org_id = r.org_id AND m.hash = u.hash AND u.created_at <= ${cutoff}`.unprepared
    return { blobs: Number(blobs[0]?.n ?? 0), chunks: Number(chunks[0]?.n ?? 0), unmarked: Number(liveAgain[0]?.n ?? 0) }
  }))

/**
 * A repository deleted after a mark may have taken away what a push relied on (it was reached there when
 * the push asked): its organization's marks restart, before any sweep.
 */
const restartAfterDeletions = (sql: Sql) =>
  sql`UPDATE gc_marks m SET marked_at = now() WHERE EXISTS (SELECT 1 FROM audit_log a
    WHERE a.org_id = m.org_id AND a.action = 'repo.delete' AND a.created_at > m.marked_at)`.unprepared

/**
 * The object-store namespaces (content, `namespaceOf`, and CI, `ciNamespace`) of organizations deleted longer ago
 * than the grace, by their record in `deleted_organizations` (written by a trigger in the deleting transaction;
 * migration 0021). Deleting an organization deletes its rows (and so every chunk row gc could find its objects
 * through), not its objects. Never derived from absence: a namespace whose organization this database never
 * deleted (another installation on the same bucket, a fresh or restored database) is never touched.
 */
const deletedNamespaces = (sql: Sql, store: ObjectStore.ObjectStoreShape, graceMs: number) =>
  Effect.gen(function*() {
    const deleted = yield* sql<{ id: string }>`SELECT d.org_id::text AS id FROM deleted_organizations d
      WHERE d.deleted_at <= ${cutoffOf(sql, graceMs)} AND NOT EXISTS (SELECT 1 FROM organizations o WHERE o.id = d.org_id)`
    if (deleted.length === 0) return []
    const present = new Set(yield* store.namespaces)
    return deleted.map(({ id }) => ({ orgId: id, namespaces: [namespaceOf(id), ciNamespace(id)].filter((n) => present.has(n)) }))
  })

/** A deleted organization's namespaces are emptied, then its record dropped; a failed delete keeps it for the next gc. */
const emptyDeleted = (sql: Sql, store: ObjectStore.ObjectStoreShape, options: { readonly graceMs: number; readonly dryRun: boolean }) =>
  Effect.gen(function*() {
    const freed = { namespaces: 0, objects: 0 }
    for (const org of yield* deletedNamespaces(sql, store, options.graceMs)) {
      freed.namespaces += org.namespaces.length
      if (options.dryRun) continue
      let failed = false
      for (const namespace of org.namespaces) {
        yield* Effect.logInfo(`gc: deleting namespace ${namespace} (its organization was deleted)`)
        const objects = yield* store.deleteNamespace(namespace).pipe(
          Effect.catch((error) => Effect.as(Effect.logWarning(`gc could not delete namespace ${namespace}`, error), undefined))
        )
        if (objects === undefined) failed = true
        else freed.objects += objects
      }
      if (!failed) yield* sql`DELETE FROM deleted_organizations WHERE org_id = ${org.orgId}`
    }
    return freed
  })

/** Push object lists whose command never ran (the command takes its list in its own transaction). */
const dropStagedPushes = (sql: Sql, graceMs: number) =>
  sql<{ n: string }>`WITH gone AS (DELETE FROM staged_pushes WHERE created_at < ${cutoffOf(sql, graceMs)} RETURNING 1)
    SELECT count(*)::text AS n FROM gone`.pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0)))

/**
 * One gc pass over content: stale staged push lists, then the due sweeps (blobs first, so a chunk is
 * checked against the blob rows that remain), then new marks. With `dryRun` the caller rolls back the
 * transaction this runs in; objects are then counted, not deleted.
 */
export const collectContent = Effect.fn("Gc.collectContent")(function*(options: { readonly graceMs: number; readonly dryRun: boolean }) {
  const sql = yield* SqlClient.SqlClient
  const store = yield* ObjectStore.ObjectStore
  const stagedPushes = yield* dropStagedPushes(sql, options.graceMs)
  yield* restartAfterDeletions(sql)
  let blobs = 0
  let unmarked = 0
  for (let more = true; more;) {
    const swept = yield* sweepBlobs(sql, options.graceMs)
    blobs += swept.blobs
    unmarked += swept.unmarked
    more = swept.more
  }
  const freed = { blobs, chunks: 0, objects: 0, bytes: 0, usedBytes: 0, namespaces: 0 }
  for (let more = true; more;) {
    const swept = yield* sweepChunks(sql, store, options.graceMs, options.dryRun)
    freed.chunks += swept.chunks
    freed.objects += swept.objects
    freed.bytes += swept.bytes
    freed.usedBytes += swept.usedBytes
    unmarked += swept.unmarked
    more = swept.more
  }
  const namespaces = yield* emptyDeleted(sql, store, options)
  freed.namespaces = namespaces.namespaces
  freed.objects += namespaces.objects
  const marked = yield* mark(sql, options.graceMs)
  return {
    stagedPushes,
    marked: { blobs: marked.blobs, chunks: marked.chunks },
    unmarked: unmarked + marked.unmarked,
    freed
  } satisfies ContentReport
})
