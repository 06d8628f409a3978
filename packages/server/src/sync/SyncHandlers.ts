/**
 * The sync protocol's JSON endpoints (shared/spec/sync-protocol.md). Pushes are
 * verified here, outside the entity, then land as one Branch command; every
 * read goes straight to the database.
 */
import { ApiErrors, type ApiSync, CurrentCaller, GroveApi } from "@grove/api"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as SparseCone from "@grove/core/objects/SparseCone"
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import * as Frames from "@grove/core/objects/Frames"
import { Effect, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { ServerConfig } from "../Config.ts"
import { branchKey } from "../content/BranchCommands.ts"
import { BranchGateway } from "../content/BranchGateway.ts"
import { toBranchData } from "../content/BranchRecord.ts"
import { Branches } from "../content/Branches.ts"
import { ChunkLinks, requestOrigin } from "./ChunkLinks.ts"
import { captureOf, checkSelected, snapshotProblem } from "../integrity/IntegritySnapshot.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { readChunks, readInOrder } from "../content/ChunkReads.ts"
import { type CommitRow, ContentObjects, toCommitData } from "../content/ContentObjects.ts"
import { callerPolicy, readableBlobsOf, readableChunksOf, withheldIn } from "../path-permissions/CallerPolicy.ts"
import { dedupScope } from "../path-permissions/DedupScope.ts"
import { History } from "../content/History.ts"
import { MAIN_BRANCH, preparePush, pushBranchName } from "../content/PushPreparation.ts"
import { repositoryKey } from "../access/RepositoryRecord.ts"
import { branchCommandFailure, contentFailure } from "../content/ContentFailures.ts"
import { actorName, commandRequest } from "../http/CallerContext.ts"
import { dbUnavailable } from "../http/Failures.ts"

/**
 * Protocol flags, as the Oak client reads them. `staged_v1` with `opaque_v1` sessions, `v1` aborts
 * and `async_v1` mapping proofs: pushes past the ordinary limits go through `push/staged-v1`
 * (staged-push/). The phase-one fields stay for clients that look for them.
 */
export const CAPABILITIES = {
  push_protocol: "staged_v1",
  staged_capabilities_ready: true,
  staged_session_protocol: "opaque_v1",
  staged_abort_protocol: "v1",
  mapping_proof_protocol: "async_v1",
  known_loss_protocol: "report_v1",
  ordinary_bootstrap_protocol: "headless_preload_v1",
  chunk_batch_protocol: "bounded_v1",
  /** Grove's binary chunk download: POST chunks/fetch {hashes} answers length-framed chunks. */
  chunk_fetch_protocol: "frames_v1",
  /** zstd per chunk on the wire (only when it shrinks): taken in chunks/batch and PUT, given by chunks/fetch when asked. */
  chunk_compression: "zstd_v1",
  /** zstd request bodies (`Content-Encoding: zstd`: the JSON routes and chunks/batch) and answers (`Accept-Encoding: zstd`): http/ContentEncoding. */
  [BodyCompression.CAPABILITY]: BodyCompression.ZSTD_V1,
  /** Frames without the hash (the receiver hashes the bytes): chunks/batch with content type `application/vnd.grove.chunk-frames.bare-v1`, chunks/fetch with `frames: "bare_v1"` (core's Frames). */
  [Frames.CAPABILITY]: Frames.BARE_V1,
  max_chunk_upload_bytes: 64 * 1024 * 1024,
  max_batch_entries: 256
} as const

/**
 * A list of distinct, well-formed hashes of bounded length, or a 400 saying what is wrong. The JSON
 * endpoints' hash lists are checked by their schema (`ApiSync.HashList`); this is for the lists no
 * schema decodes (the binary chunk fetch, the entries of `chunks/uploaded`).
 */
export const checkHashList = (hashes: ReadonlyArray<string>, max: number, what = "hashes") => {
  if (hashes.length > max) {
    return Effect.fail(new ApiErrors.BadRequest({ error: `at most ${max} ${what} per request`, code: "too_many" }))
  }
  const seen = new Set<string>()
  for (const h of hashes) {
    if (!Blake3.isHash(h)) {
      return Effect.fail(new ApiErrors.BadRequest({ error: `'${String(h).slice(0, 80)}' is not a hash: 64 lowercase hex characters`, code: "invalid_hash" }))
    }
    if (seen.has(h)) return Effect.fail(new ApiErrors.BadRequest({ error: `${h} is listed twice`, code: "duplicate_hash" }))
    seen.add(h)
  }
  return Effect.void
}

/**
 * A blob as the wire carries it on pull and blobs/info: chunk references, no content. The empty blob
 * goes out with no chunks, its shape in the Oak client (which never uploads it as a chunk): with a
 * zero-byte chunk listed, a mount kept that reference without the chunk and refused to push it.
 */
const toBlobData = (b: { hash: string; size: number; chunks: ReadonlyArray<ApiSync.ChunkRefData> }): ApiSync.BlobData => ({
  hash: b.hash,
  content: [],
  size: b.size,
  chunks: b.size === 0 ? [] : b.chunks
})

const DIGITS = Array.from({ length: 256 }, (_, v) => Buffer.from(String(v), "latin1"))

/** `b0,b1,…` in ASCII: the inside of serde's `Vec<u8>` JSON, written straight into bytes (~100 MB/s). */
export const byteListJson = (bytes: Uint8Array): Uint8Array => {
  const out = Buffer.allocUnsafe(bytes.length * 4)
  let o = 0
  for (let i = 0; i < bytes.length; i++) {
    if (i > 0) out[o++] = 44
    const digits = DIGITS[bytes[i]!]!
    for (let k = 0; k < digits.length; k++) out[o++] = digits[k]!
  }
  return out.subarray(0, o)
}

const ascii = (text: string): Uint8Array => Buffer.from(text, "latin1")

/** `blobs/check` with `verify_content` reads every byte: a small page only, as the Oak client asks for it. */
const VERIFY_CONTENT_MAX = 32

/**
 * A pull's answer as JSON, without the endpoint's schema encoding: every field of a PullResponse is a plain JSON value
 * built field by field (toBranchData, toCommitData, toTreeData, toBlobData), so encoding changed nothing and only
 * walked it (a 5,000-file clone: 2.8 MB; ~15-20 of ~150 ms of server CPU per pull, with the garbage it left).
 */
export const pullJson = (answer: ApiSync.PullResponse) =>
  HttpServerResponse.text(JSON.stringify(answer), { contentType: "application/json" })

const conflict = (error: string, code: string) => Effect.fail(new ApiErrors.Conflict({ error, code }))

export const SyncHandlers = HttpApiBuilder.group(GroveApi, "sync", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const objects = yield* ContentObjects
  const chunkStore = yield* ChunkStore
  const history = yield* History
  const branches = yield* Branches
  const gateway = yield* BranchGateway
  const services = Effect.provideService(ContentObjects, objects)
  const withChunks = Effect.provideService(ChunkStore, chunkStore)
  const links = yield* ChunkLinks
  const config = yield* ServerConfig
  const originOf = (request: HttpServerRequest.HttpServerRequest) => requestOrigin(request.headers, config.siteUrl)

  const readable = (owner: string, name: string) =>
    Effect.gen(function*() {
      const caller = yield* CurrentCaller
      return yield* dbUnavailable(authorizer.repository(caller, owner, name, "read"))
    })

  return handlers.handleAll({
    capabilities: () => Effect.succeed(CAPABILITIES),

    push: Effect.fn("Sync.push")(function*({ params, payload }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "write"))
      const branchName = pushBranchName(payload)
      if (branchName === MAIN_BRANCH) {
        return yield* new ApiErrors.Forbidden({
          error: "main changes only by merge or revert: push a branch and merge it",
          code: "main_protected"
        })
      }
      const scope = yield* dbUnavailable(dedupScope(caller, repo).pipe(services))
      const prepared = yield* contentFailure(preparePush(repo, payload, scope).pipe(services, withChunks))
      const stagedId = prepared.commits.length === 0
        ? null
        : yield* dbUnavailable(objects.stagePush(repo.id, { trees: prepared.newTrees, blobs: prepared.newBlobs }))
      return yield* gateway.push(branchKey(repositoryKey(repo.owner, repo.name), prepared.branchName), {
        stagedId,
        commits: prepared.commits,
        tip: prepared.tip,
        force: payload.force ?? false,
        branch: payload.branch ?? null,
        actor: yield* actorName
      }, yield* commandRequest).pipe(Effect.catch(branchCommandFailure))
    }),

    pull: Effect.fn("Sync.pull")(function*({ params, query }) {
      const repo = yield* readable(params.owner, params.name)
      const target = query.branch_name ?? MAIN_BRANCH
      const force = query.force === "true" || query.force === "1"
      // Decimal digits only: Number() would also take "1e3", "0x10" and " " (as 0).
      const depth = query.depth === undefined || query.depth === "" ? 0 : /^[0-9]{1,15}$/.test(query.depth) ? Number(query.depth) : NaN
      if (!Number.isSafeInteger(depth) || depth < 0) {
        return yield* new ApiErrors.BadRequest({ error: "depth must be a non-negative integer", code: "invalid_input" })
      }
      const cone = SparseCone.parseCone(query.paths ?? "")
      if (!cone.ok) return yield* new ApiErrors.BadRequest({ error: cone.reason, code: "invalid_paths" })
      if (query.since !== undefined && query.since !== "" && !Blake3.isHash(query.since)) {
        return yield* new ApiErrors.BadRequest({ error: "since must be a commit hash", code: "invalid_hash" })
      }
      const rows = yield* dbUnavailable(branches.list(repo.id))
      // A clone's preflight pin: the scope it proved must be the one asked for, with the same heads (else 412).
      const selectedBranch = query.selected_branch ?? null
      const expectedHead = query.expected_head ?? null
      if (query.integrity_snapshot !== undefined || selectedBranch !== null) {
        if (query.integrity_snapshot === undefined) {
          return yield* new ApiErrors.PreconditionFailed({ error: "selected_branch requires an integrity snapshot precondition", code: "snapshot_required" })
        }
        const scopeDepth = depth > 0 ? depth : null
        const captured = captureOf(rows, scopeDepth, query.branch_name ?? null, selectedBranch)
        yield* checkSelected(selectedBranch, expectedHead, captured.selected)
        const problem = snapshotProblem(query.integrity_snapshot, {
          depth: scopeDepth,
          branch: query.branch_name ?? null,
          paths: query.paths ?? null,
          selectedBranch,
          expectedHead
        }, captured)
        if (problem === "invalid") return yield* new ApiErrors.BadRequest({ error: "invalid integrity snapshot", code: "invalid_input" })
        if (problem !== undefined) return yield* new ApiErrors.PreconditionFailed({ error: problem, code: "snapshot_changed" })
      }
      const branch = rows.find((b) => b.name === target)
      // In the schema's order (head first): the answer is the same text as the endpoint's encoding would give.
      const base = { branch: branch === undefined ? null : toBranchData(branch), branches: rows.map(toBranchData) }
      const head = branch?.head ?? null
      // A full clone of a selected branch also needs that branch's own commits (after the target's: parents first).
      const selectedHead = selectedBranch === null || selectedBranch === target || depth > 0
        ? null
        : rows.find((b) => b.name === selectedBranch)?.head ?? null
      if (head === null && selectedHead === null) return { ...base, head: null, commits: [], blobs: [], trees: [] }

      let commits: ReadonlyArray<CommitRow> = []
      if (head === null) {
        // The target is empty: only the selected branch's commits.
      } else if (depth > 0) {
        commits = (yield* dbUnavailable(history.firstParentChain(repo.id, head, depth))).reverse()
      } else {
        let since = query.since === undefined || query.since === "" ? undefined : query.since
        if (since !== undefined) {
          const published = yield* dbUnavailable(history.publishedCommits(repo.id, [since]))
          if (!published.has(since)) {
            if (!force) {
              return yield* conflict(
                "Conflict detected: local has commits not in remote history. Push your changes first.",
                "since_unpublished"
              )
            }
            since = undefined
          } else if (!(yield* dbUnavailable(history.isOnFirstParentChain(repo.id, head, since)))) {
            if (!force) {
              return yield* conflict(
                `branch '${target}' was rewritten (force-pushed) since ${since}. Use a forced pull to take the server's history.`,
                "branch_rewritten"
              )
            }
            since = undefined
          }
        }
        const all = yield* dbUnavailable(history.branchCommits(repo.id, target, head))
        if (since === undefined) commits = all
        else {
          // Drop `since` and everything before it.
          const byHash = new Map(all.map((c) => [c.hash, c]))
          const before = new Set<string>()
          const stack = [since]
          for (let h = stack.pop(); h !== undefined; h = stack.pop()) {
            if (before.has(h)) continue
            before.add(h)
            const c = byHash.get(h)
            if (c !== undefined) for (const p of [c.parent_hash, c.merge_parent_hash]) if (p !== null) stack.push(p)
          }
          commits = all.filter((c) => !before.has(c.hash))
        }
      }
      if (selectedHead !== null) {
        const have = new Set(commits.map((c) => c.hash))
        const extra = (yield* dbUnavailable(history.branchCommits(repo.id, selectedBranch!, selectedHead))).filter((c) => !have.has(c.hash))
        commits = [...commits, ...extra]
      }
      const reach = yield* dbUnavailable(history.reachable(repo.orgId, commits.map((c) => c.manifest_hash), true))
      // A sparse pull (`paths`): every tree, so manifests verify, but only the blobs inside the cone.
      const inCone = cone.prefixes === undefined
        ? undefined
        : SparseCone.blobsInCone(cone.prefixes, commits.map((c) => c.manifest_hash), reach.trees)
      // Trees are sent whole; blobs at paths the caller may not read are withheld and named.
      const policy = yield* callerPolicy(yield* CurrentCaller, repo)
      const withheld = yield* withheldIn(policy, repo.orgId, commits.map((c) => c.manifest_hash))
      return pullJson({
        head,
        ...base,
        commits: commits.map(toCommitData),
        blobs: reach.blobs.filter((b) => !withheld.has(b.hash) && (inCone === undefined || inCone.has(b.hash))).map(toBlobData),
        trees: [...reach.trees],
        ...(withheld.size === 0 ? {} : { restricted_blobs: [...withheld].sort() })
      })
    }),

    commitsInfo: Effect.fnUntraced(function*({ params, payload }) {
      const repo = yield* readable(params.owner, params.name)
      const found = yield* dbUnavailable(history.publishedCommits(repo.id, payload.hashes))
      const commits = payload.hashes.flatMap((h) => {
        const c = found.get(h)
        return c === undefined ? [] : [c]
      })
      if (payload.metadata_only === true) return { commits: commits.map(toCommitData), trees: [] }
      const reach = yield* dbUnavailable(history.reachable(repo.orgId, commits.map((c) => c.manifest_hash), false))
      return { commits: commits.map(toCommitData), trees: [...reach.trees] }
    }),

    blobsCheck: Effect.fnUntraced(function*({ params, payload }) {
      // Only writers, who are about to upload, may ask; and a blob counts as present only when the caller can
      // read it already or uploaded it: dedup never grants access.
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "write"))
      const scope = yield* dbUnavailable(dedupScope(caller, repo).pipe(services))
      // Nor of content path permissions withhold from the caller: the scope counts only what it may read.
      const have = yield* dbUnavailable(objects.present("blob", scope, payload.hashes))
      const missing = payload.hashes.filter((h) => !have.has(h))
      // Every registered blob was re-hashed from its chunks before it was registered, so the strict receipt
      // predicate holds for all of them; `verify_content` re-reads and re-hashes them now.
      const receipts = payload.require_verified_receipts === true ? { verified_receipts_required: true } : {}
      if (payload.verify_content !== true) return { missing, ...receipts }
      if (payload.hashes.length > VERIFY_CONTENT_MAX) {
        return yield* new ApiErrors.BadRequest({ error: `verify_content checks at most ${VERIFY_CONTENT_MAX} blobs per request`, code: "too_many" })
      }
      const gone = new Set(missing)
      const info = yield* dbUnavailable(objects.blobInfo(repo.orgId, payload.hashes.filter((h) => !gone.has(h))))
      for (const [hash, blob] of info) {
        // A chunk that cannot be read counts as missing content, like one that reads wrong.
        const read = yield* Blake3.hashStream(readChunks(chunkStore, repo.orgId, blob.chunks)).pipe(Effect.option)
        if (read._tag === "None" || read.value.size !== blob.size || read.value.hash !== hash) gone.add(hash)
      }
      for (const h of payload.hashes) if (!info.has(h)) gone.add(h)
      return { missing: payload.hashes.filter((h) => gone.has(h)), verified_content: true, ...receipts }
    }),

    blobsInfo: Effect.fnUntraced(function*({ params, payload }) {
      const repo = yield* readable(params.owner, params.name)
      // Only blobs this repository's published commits reach: dedup must not open other repositories' content.
      const inRepo = yield* dbUnavailable(objects.repoBlobs(repo.id, payload.hashes))
      // Nor content path permissions withhold: only blobs the caller may read at some path of a published commit.
      const readableBlobs = yield* readableBlobsOf(yield* callerPolicy(yield* CurrentCaller, repo), repo, [...inRepo])
      const info = yield* dbUnavailable(objects.blobInfo(repo.orgId, [...readableBlobs]))
      const restricted = payload.hashes.filter((h) => inRepo.has(h) && !readableBlobs.has(h))
      return {
        blobs: payload.hashes.flatMap((h) => {
          const b = info.get(h)
          return b === undefined ? [] : [toBlobData(b)]
        }),
        ...(restricted.length === 0 ? {} : { restricted })
      }
    }),

    chunksCheck: Effect.fnUntraced(function*({ params, payload }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "write"))
      const sizes = payload.sizes ?? null
      if (sizes !== null && sizes.length !== payload.hashes.length) {
        return yield* new ApiErrors.BadRequest({ error: "sizes must list one size per hash", code: "invalid_input" })
      }
      // Stored chunks the caller cannot read (path permissions included) count as missing: it uploads them
      // (they are still stored once).
      const scope = yield* dbUnavailable(dedupScope(caller, repo).pipe(services))
      const present = yield* dbUnavailable(objects.present("chunk", scope, payload.hashes))
      const missing = payload.hashes.filter((h) => !present.has(h))
      if (sizes !== null && missing.length > 0) {
        const wanted = new Set(missing)
        const needed = payload.hashes.reduce((sum, h, i) => sum + (wanted.has(h) ? sizes[i] ?? 0 : 0), 0)
        const usage = yield* dbUnavailable(objects.orgUsage(repo.orgId))
        if (usage.usedBytes + needed > usage.quotaBytes) {
          return yield* new ApiErrors.PayloadTooLarge({
            error: `organization ${repo.owner} would exceed its storage quota: ${usage.usedBytes} of ${usage.quotaBytes} bytes used, ` +
              `these chunks need ${needed} more`,
            code: "quota_exceeded"
          })
        }
      }
      return { missing: missing.map((hash) => ({ hash, upload_url: null })) }
    }),

    chunksDownload: Effect.fnUntraced(function*({ params, payload, request }) {
      const repo = yield* readable(params.owner, params.name)
      const inRepo = yield* dbUnavailable(objects.readableChunks(repo.id, repo.orgId, payload.hashes))
      const allowed = yield* readableChunksOf(yield* callerPolicy(yield* CurrentCaller, repo), repo, [...inRepo])
      const wanted = payload.hashes.filter((h) => allowed.has(h))
      const restricted = payload.hashes.filter((h) => inRepo.has(h) && !allowed.has(h))
      const located = yield* dbUnavailable(chunkStore.locate(repo.orgId, wanted))
      if (payload.chunk_batch_protocol === "bounded_v1") {
        // Binary links (ChunkLinks): a GET per chunk, and a framed batch for many; nothing inline.
        const base = `${originOf(request)}/api/${repo.owner}/${repo.name}/chunks/fetch`
        return {
          chunks: wanted.filter((h) => located.has(h)).map((hash) => ({ hash, download_url: `${base}/${hash}?t=${links.token(repo.id, hash)}` })),
          batch_url: base,
          ...(restricted.length === 0 ? {} : { restricted })
        }
      }
      // Clients without the bounded batch protocol get the bytes inline: the shape of ChunkDownloadResponse, streamed a chunk at a time: inline content is ~3.6 JSON bytes per byte, so one
      // JSON string of a large download would pass V8's string limit (~512 MiB) and hold every byte as a JS number.
      const entries = readInOrder(chunkStore, repo.orgId, wanted, located).pipe(
        Stream.zipWithIndex,
        Stream.flatMap(([chunk, i]) =>
          Stream.make(
            ascii(`${i === 0 ? "" : ","}{"hash":"${chunk.hash}","download_url":null,"content":[`),
            byteListJson(chunk.data),
            ascii("]}")
          )
        )
      )
      const trailer = restricted.length === 0 ? "]}" : `],"restricted":${JSON.stringify(restricted)}}`
      const body = Stream.make(ascii(`{"chunks":[`)).pipe(Stream.concat(entries), Stream.concat(Stream.make(ascii(trailer))))
      return HttpServerResponse.stream(body, { contentType: "application/json" })
    }),

    chunksUploaded: Effect.fnUntraced(function*({ params, payload }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "write"))
      yield* checkHashList(payload.hashes.map((e) => e.hash), 256)
      // Confirms only what the caller may count as present, or it would tell the size of a chunk it cannot read.
      const scope = yield* dbUnavailable(dedupScope(caller, repo).pipe(services))
      const present = yield* dbUnavailable(objects.present("chunk", scope, payload.hashes.map((e) => e.hash)))
      const sizes = yield* dbUnavailable(chunkStore.sizes(repo.orgId, [...present]))
      for (const entry of payload.hashes) {
        if (sizes.get(entry.hash) !== entry.size) {
          return yield* new ApiErrors.BadRequest({ error: `chunk ${entry.hash} of ${entry.size} bytes was not received`, code: "missing_chunk" })
        }
      }
      return { ok: true }
    })
  })
}))
