/**
 * Blob mapping proofs (`async_v1`): before a staged push names a large blob, the client declares
 * its size, chunk count and mapping digest (`create`), uploads the chunk list in pages (`putPages`)
 * and its chunks (the ordinary chunk routes), then asks for the check (`finalize`). The check reads
 * every chunk the caller may count as present and re-hashes the blob; a blob that hashes right is
 * registered in the organization and recorded as the caller's upload, and the proof's token lets a
 * staged batch name the blob without carrying its bytes. Checks run in the background under a
 * lease, so a node that dies mid-check leaves the proof to the next poll on any node.
 */
import type { ApiStagedPush } from "@grove/api"
import * as Blake3 from "@grove/core/objects/Blake3"
import { mappingDigest } from "@grove/core/objects/MappingDigest"
import { Context, Effect, Exit, Fiber, Layer, Option, Schema, Scope } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { randomBytes } from "node:crypto"
import { ChunkStore } from "../content/ChunkStore.ts"
import { checkedBlob } from "../content/CanonicalChunks.ts"
import { type BlobInfo, ContentObjects, type DedupScope } from "../content/ContentObjects.ts"

/** The client's bounds (oak-core protocol.rs), enforced as it expects them. */
export const PROOF_MAX_BLOBS = 128
export const PROOF_MAX_SET_CHUNK_REFS = 131_072
export const PROOF_MAX_BLOB_BYTES = 25 * 1024 ** 3
export const PROOF_MAX_CHUNK_BYTES = 64 * 1024 * 1024
export const PROOF_PAGE_CHUNK_REFS = 10_000
/** Open (uploading or running) proofs per repository and caller. */
export const MAX_OPEN_PROOFS = 64
const PROOF_TTL_HOURS = 24
const LEASE_SECONDS = 60
const HEARTBEAT_MS = 10_000
/** How long `finalize` waits for a check before answering 202 and leaving it to polls. */
const INLINE_WAIT_MS = 2_000

type Descriptor = ApiStagedPush.BlobProofDescriptor
type Chunk = ApiStagedPush.BlobProofChunk
type ProofResponse = ApiStagedPush.BlobProofResponse

export type ProofStatus = "uploading" | "running" | "complete"

export interface ProofRow {
  readonly token: string
  readonly repoId: string
  readonly principal: string
  readonly status: ProofStatus
  readonly descriptors: ReadonlyArray<Descriptor>
  readonly verified: ReadonlyArray<string>
  readonly missing: ReadonlyArray<string>
  readonly leaseUntil: Date | null
  readonly version: number
}

/** What the proof routes answer: a body, and 200 (complete) or 202 (pending). */
export interface ProofAnswer {
  readonly status: 200 | 202
  readonly body: ProofResponse
}

/** A refusal the edge turns into 400 / 404 / 409 / 429. */
export class ProofRefused extends Schema.TaggedError<ProofRefused>()("ProofRefused", {
  status: Schema.Literals([400, 404, 409, 429]),
  message: Schema.String,
  code: Schema.String
}) {}

const json = <A>(value: unknown): A => (typeof value === "string" ? JSON.parse(value) : value) as A

type Row = {
  token: string
  repo_id: string
  principal: string
  status: ProofStatus
  descriptors: unknown
  verified: unknown
  missing: unknown
  lease_until: Date | string | null
  version: string
}

const toProofRow = (r: Row): ProofRow => ({
  token: r.token,
  repoId: r.repo_id,
  principal: r.principal,
  status: r.status,
  descriptors: json(r.descriptors),
  verified: r.verified === null ? [] : json(r.verified),
  missing: r.missing === null ? [] : json(r.missing),
  leaseUntil: r.lease_until === null ? null : new Date(r.lease_until),
  version: Number(r.version)
})

export const answerOf = (row: ProofRow): ProofAnswer =>
  row.status === "complete"
    ? {
      status: 200,
      body: { verified: row.verified, missing: row.missing, ...(row.missing.length === 0 ? { proof_token: row.token } : {}) }
    }
    : { status: 202, body: { verified: [], missing: [], mapping_proof_job: { token: row.token, status: row.status, retry_after_ms: 250 } } }

const refuse = (status: 400 | 404 | 409 | 429, message: string, code: string) => Effect.fail(new ProofRefused({ status, message, code }))
const notFound = refuse(404, "mapping proof not found", "not_found")

/** The declared set is within the client's bounds and well-formed. */
export const checkDescriptors = (blobs: ReadonlyArray<Descriptor>): string | undefined => {
  if (blobs.length === 0 || blobs.length > PROOF_MAX_BLOBS) return `a proof covers 1 to ${PROOF_MAX_BLOBS} blobs`
  let refs = 0
  let bytes = 0
  const seen = new Set<string>()
  for (const b of blobs) {
    if (!Blake3.isHash(b.hash)) return "a blob hash must be 64 lowercase hex characters"
    if (!Blake3.isHash(b.mapping_digest)) return `the mapping digest of blob ${b.hash} must be 64 lowercase hex characters`
    if (seen.has(b.hash)) return `blob ${b.hash} is declared twice`
    seen.add(b.hash)
    if (b.total_chunks < 1 || b.total_chunks > PROOF_MAX_SET_CHUNK_REFS) return `blob ${b.hash} must have 1 to ${PROOF_MAX_SET_CHUNK_REFS} chunks`
    if (b.size > PROOF_MAX_BLOB_BYTES) return `blob ${b.hash} is larger than ${PROOF_MAX_BLOB_BYTES} bytes`
    refs += b.total_chunks
    bytes += b.size
  }
  if (refs > PROOF_MAX_SET_CHUNK_REFS) return `a proof covers at most ${PROOF_MAX_SET_CHUNK_REFS} chunk references`
  if (bytes > PROOF_MAX_BLOB_BYTES) return `a proof covers at most ${PROOF_MAX_BLOB_BYTES} bytes`
  return undefined
}

/**
 * Each declared blob's chunk list, from its pages: they must tile the list exactly, and the list must start at
 * offset 0, be contiguous, add up to the blob's size and hash to the declared digest.
 */
export const assembleMappings = (
  descriptors: ReadonlyArray<Descriptor>,
  pages: ReadonlyArray<{ readonly blobIndex: number; readonly first: number; readonly chunks: ReadonlyArray<Chunk> }>
): { readonly ok: true; readonly mappings: ReadonlyArray<ReadonlyArray<Chunk>> } | { readonly ok: false; readonly reason: string } => {
  const mappings: Array<Array<Chunk>> = descriptors.map(() => [])
  const sorted = [...pages].sort((a, b) => a.blobIndex - b.blobIndex || a.first - b.first)
  for (const page of sorted) {
    const list = mappings[page.blobIndex]
    if (list === undefined) return { ok: false, reason: `page for blob index ${page.blobIndex}, which is not declared` }
    if (page.first !== list.length) return { ok: false, reason: `the pages of blob ${descriptors[page.blobIndex]!.hash} overlap or leave a gap at chunk ${list.length}` }
    list.push(...page.chunks)
  }
  for (const [i, d] of descriptors.entries()) {
    const list = mappings[i]!
    if (list.length !== d.total_chunks) return { ok: false, reason: `blob ${d.hash} has ${list.length} of its ${d.total_chunks} chunks uploaded` }
    let offset = 0
    for (const c of list) {
      if (c.offset !== offset) return { ok: false, reason: `blob ${d.hash}: a chunk starts at ${c.offset}, expected ${offset}` }
      offset += c.size
    }
    if (offset !== d.size) return { ok: false, reason: `blob ${d.hash}: its chunks add up to ${offset} bytes, not ${d.size}` }
    if (mappingDigest(list) !== d.mapping_digest) return { ok: false, reason: `blob ${d.hash}: the chunk list does not match its mapping digest` }
  }
  return { ok: true, mappings }
}

const newToken = () => randomBytes(16).toString("hex")

export class BlobProofs extends Context.Service<BlobProofs, {
  readonly create: (scope: DedupScope, blobs: ReadonlyArray<Descriptor>) => Effect.Effect<ProofAnswer, ProofRefused | SqlError>
  readonly putPages: (
    scope: DedupScope,
    token: string,
    pages: ReadonlyArray<{ readonly blob_index: number; readonly first_chunk_index: number; readonly chunks: ReadonlyArray<Chunk> }>
  ) => Effect.Effect<ApiStagedPush.BlobProofPagesResponse, ProofRefused | SqlError>
  readonly finalize: (scope: DedupScope, token: string) => Effect.Effect<ProofAnswer, ProofRefused | SqlError>
  readonly poll: (scope: DedupScope, token: string) => Effect.Effect<ProofAnswer, ProofRefused | SqlError>
  /** A complete proof of this caller in this repository, for a staged batch; undefined if there is none. */
  readonly completed: (scope: DedupScope, token: string) => Effect.Effect<ProofRow | undefined, SqlError>
}>()("grove/server/staged-push/BlobProofs") {
  static readonly layer = Layer.effect(BlobProofs, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const objects = yield* ContentObjects
    const chunkStore = yield* ChunkStore
    const layerScope = yield* Scope.Scope
    // Expired proofs (a day old) go, on every node now and then, with their pages.
    yield* sql`DELETE FROM blob_proofs WHERE expires_at < now()`.pipe(
      Effect.catchCause((cause) => Effect.logWarning("collecting expired blob proofs failed", cause)),
      Effect.delay("1 hour"),
      Effect.forever,
      Effect.forkIn(layerScope)
    )

    const load = (scope: DedupScope, token: string) =>
      sql<Row>`SELECT token, repo_id::text AS repo_id, principal, status, descriptors, verified, missing, lease_until, version::text AS version
        FROM blob_proofs WHERE token = ${token} AND repo_id = ${scope.repoId} AND principal = ${scope.principal} AND expires_at > now()`.pipe(
        Effect.map((rows) => rows[0] === undefined ? undefined : toProofRow(rows[0]))
      )

    const loadPages = (token: string) =>
      sql<{ blob_index: number; first_chunk_index: number; chunks: unknown }>`SELECT blob_index, first_chunk_index, chunks
        FROM blob_proof_pages WHERE token = ${token}`.pipe(
        Effect.map((rows) => rows.map((r) => ({ blobIndex: Number(r.blob_index), first: Number(r.first_chunk_index), chunks: json<Array<Chunk>>(r.chunks) })))
      )

    /** Re-hashes each blob from the chunks the caller may count as present; registers the ones that hash right (a large one sent uncut as FastCDC cuts it). */
    const check = Effect.fnUntraced(function*(scope: DedupScope, row: ProofRow, mappings: ReadonlyArray<ReadonlyArray<Chunk>>) {
      const all = [...new Set(mappings.flatMap((m) => m.map((c) => c.hash)))]
      const visible = yield* objects.present("chunk", scope, all)
      const sizes = yield* chunkStore.sizes(scope.orgId, [...visible])
      // One sent uncut is cut as FastCDC cuts it (CanonicalChunks); a blob the organization has keeps its list (registerBlobs).
      const verified: Array<BlobInfo> = []
      const missing: Array<string> = []
      for (const [i, d] of row.descriptors.entries()) {
        const chunks = mappings[i]!
        if (!chunks.every((c) => sizes.get(c.hash) === c.size)) {
          missing.push(d.hash)
          continue
        }
        const blob = yield* checkedBlob(scope.orgId, scope, { hash: d.hash, size: d.size, chunks }).pipe(
          Effect.provideService(ChunkStore, chunkStore),
          Effect.provideService(ContentObjects, objects)
        )
        if (blob !== undefined) verified.push(blob)
        else missing.push(d.hash)
      }
      yield* objects.registerBlobs(scope.orgId, verified)
      yield* objects.recordUploads(scope, verified.map((b) => b.hash))
      return { verified: verified.map((b) => b.hash), missing }
    })

    /** The background check of a claimed proof: heartbeats its lease, completes it with a compare-and-set. */
    const run = (scope: DedupScope, row: ProofRow, mappings: ReadonlyArray<ReadonlyArray<Chunk>>) =>
      Effect.gen(function*() {
        let version = row.version
        const heartbeat = yield* Effect.forkChild(Effect.forever(Effect.gen(function*() {
          yield* Effect.sleep(HEARTBEAT_MS)
          const renewed = yield* sql`UPDATE blob_proofs SET lease_until = now() + make_interval(secs => ${LEASE_SECONDS}), version = version + 1
            WHERE token = ${row.token} AND version = ${version} AND status = 'running' RETURNING 1`
          if (renewed.length === 0) return yield* Effect.interrupt
          version++
        })))
        const result = yield* check(scope, row, mappings).pipe(Effect.ensuring(Fiber.interrupt(heartbeat)))
        yield* sql`UPDATE blob_proofs SET status = 'complete', verified = ${JSON.stringify(result.verified)}::jsonb,
            missing = ${JSON.stringify(result.missing)}::jsonb, lease_until = NULL, version = version + 1, updated_at = now()
          WHERE token = ${row.token} AND version = ${version} AND status = 'running'`
      }).pipe(
        Effect.catchCause((cause) => Effect.logWarning("blob proof check failed; the next poll retries it", cause))
      )

    /** Claims an uploading proof (or a running one whose lease ran out) and starts its check; answers the fiber. */
    const claim = Effect.fnUntraced(function*(scope: DedupScope, row: ProofRow) {
      const assembled = assembleMappings(row.descriptors, yield* loadPages(row.token))
      if (!assembled.ok) return yield* refuse(409, assembled.reason, "mapping_incomplete")
      const claimed = yield* sql<{ version: string }>`UPDATE blob_proofs SET status = 'running',
          lease_until = now() + make_interval(secs => ${LEASE_SECONDS}), version = version + 1, updated_at = now()
        WHERE token = ${row.token} AND version = ${row.version} RETURNING version::text AS version`
      if (claimed.length === 0) return undefined
      const running: ProofRow = { ...row, status: "running", version: Number(claimed[0]!.version) }
      return yield* Effect.forkIn(run(scope, running, assembled.mappings), layerScope)
    })

    const current = Effect.fnUntraced(function*(scope: DedupScope, token: string) {
      const row = yield* load(scope, token)
      return row === undefined ? yield* notFound : row
    })

    /** Starts the check if nobody runs it, waits a little for it, and answers the proof's state. */
    const advance = Effect.fnUntraced(function*(scope: DedupScope, token: string, start: boolean) {
      const row = yield* current(scope, token)
      const stale = row.status === "running" && (row.leaseUntil === null || row.leaseUntil.getTime() < Date.now())
      if ((start && row.status === "uploading") || stale) {
        const fiber = yield* claim(scope, row)
        if (fiber !== undefined) yield* Fiber.await(fiber).pipe(Effect.timeoutOption(INLINE_WAIT_MS), Effect.map(Option.map(Exit.isSuccess)))
        return answerOf(yield* current(scope, token))
      }
      return answerOf(row)
    })

    return BlobProofs.of({
      create: Effect.fnUntraced(function*(scope, blobs) {
        const problem = checkDescriptors(blobs)
        if (problem !== undefined) return yield* refuse(400, problem, "invalid_proof")
        const digest = Blake3.hash(`grove-blob-proof-v1\0${scope.repoId}\0${scope.principal}\0${JSON.stringify(blobs)}`)
        yield* sql`DELETE FROM blob_proofs WHERE repo_id = ${scope.repoId} AND expires_at < now()`
        const existing = yield* sql<Row>`SELECT token, repo_id::text AS repo_id, principal, status, descriptors, verified, missing, lease_until,
            version::text AS version FROM blob_proofs WHERE repo_id = ${scope.repoId} AND principal = ${scope.principal} AND request_digest = ${digest}`
        if (existing[0] !== undefined) {
          const row = toProofRow(existing[0])
          // A proof that found blobs missing is checked again once their chunks are uploaded: back to uploading.
          if (row.status === "complete" && row.missing.length > 0) {
            yield* sql`UPDATE blob_proofs SET status = 'uploading', verified = NULL, missing = NULL, version = version + 1, updated_at = now(),
              expires_at = now() + make_interval(hours => ${PROOF_TTL_HOURS}) WHERE token = ${row.token} AND version = ${row.version}`
            return answerOf(yield* current(scope, row.token))
          }
          return answerOf(row)
        }
        const open = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM blob_proofs
          WHERE repo_id = ${scope.repoId} AND principal = ${scope.principal} AND status <> 'complete'`
        if (Number(open[0]?.n ?? 0) >= MAX_OPEN_PROOFS) {
          return yield* refuse(429, `at most ${MAX_OPEN_PROOFS} blob proofs may be open at once; finish or wait for one`, "too_many_proofs")
        }
        const token = newToken()
        yield* sql`INSERT INTO blob_proofs ${
          sql.insert({
            token,
            repo_id: scope.repoId,
            principal: scope.principal,
            request_digest: digest,
            status: "uploading",
            descriptors: JSON.stringify(blobs),
            expires_at: new Date(Date.now() + PROOF_TTL_HOURS * 3_600_000)
          })
        } ON CONFLICT (repo_id, principal, request_digest) DO NOTHING`
        const row = yield* sql<Row>`SELECT token, repo_id::text AS repo_id, principal, status, descriptors, verified, missing, lease_until,
            version::text AS version FROM blob_proofs WHERE repo_id = ${scope.repoId} AND principal = ${scope.principal} AND request_digest = ${digest}`
        return answerOf(toProofRow(row[0]!))
      }),

      putPages: Effect.fnUntraced(function*(scope, token, pages) {
        const row = yield* current(scope, token)
        const count = pages.reduce((n, p) => n + p.chunks.length, 0)
        if (pages.length === 0 || count === 0 || count > PROOF_PAGE_CHUNK_REFS) {
          return yield* refuse(400, `a request carries 1 to ${PROOF_PAGE_CHUNK_REFS} chunk references`, "invalid_page")
        }
        for (const page of pages) {
          const d = row.descriptors[page.blob_index]
          if (d === undefined) return yield* refuse(400, `blob index ${page.blob_index} is not declared`, "invalid_page")
          if (page.chunks.length === 0 || page.first_chunk_index + page.chunks.length > d.total_chunks) {
            return yield* refuse(400, `the page passes blob ${d.hash}'s ${d.total_chunks} chunks`, "invalid_page")
          }
          for (const c of page.chunks) {
            if (!Blake3.isHash(c.hash)) return yield* refuse(400, "a chunk hash must be 64 lowercase hex characters", "invalid_page")
            if (c.size < 1 || c.size > PROOF_MAX_CHUNK_BYTES) return yield* refuse(400, `chunk ${c.hash} must be 1 to ${PROOF_MAX_CHUNK_BYTES} bytes`, "invalid_page")
          }
        }
        if (row.status === "running") return yield* refuse(409, "the mapping proof is being checked; its pages can no longer change", "proof_running")
        if (row.status === "uploading") {
          const moved = yield* sql.withTransaction(Effect.gen(function*() {
            const touched = yield* sql`UPDATE blob_proofs SET updated_at = now(), version = version + 1
              WHERE token = ${token} AND version = ${row.version} AND status = 'uploading' RETURNING 1`
            if (touched.length === 0) return false
            for (const p of pages) {
              yield* sql`INSERT INTO blob_proof_pages ${
                sql.insert({ token, blob_index: p.blob_index, first_chunk_index: p.first_chunk_index, chunk_count: p.chunks.length, chunks: JSON.stringify(p.chunks) })
              } ON CONFLICT (token, blob_index, first_chunk_index) DO UPDATE SET chunk_count = EXCLUDED.chunk_count, chunks = EXCLUDED.chunks`
            }
            return true
          }))
          if (!moved) return yield* refuse(409, "the mapping proof changed while its page was stored; send it again", "proof_raced")
        }
        // A complete proof takes a page again without change (a client retrying a lost answer).
        const counts = yield* sql<{ blob_index: number; n: string }>`SELECT blob_index, sum(chunk_count)::text AS n FROM blob_proof_pages
          WHERE token = ${token} GROUP BY blob_index`
        const complete = counts.filter((c) => Number(c.n) === row.descriptors[Number(c.blob_index)]?.total_chunks).map((c) => Number(c.blob_index)).sort((a, b) => a - b)
        return { accepted_chunks: count, complete_blobs: complete, all_mappings_complete: complete.length === row.descriptors.length }
      }),

      finalize: (scope, token) => advance(scope, token, true),
      poll: (scope, token) => advance(scope, token, false),

      completed: Effect.fnUntraced(function*(scope, token) {
        const row = yield* load(scope, token)
        return row?.status === "complete" ? row : undefined
      })
    })
  }))
}
