/**
 * The sync protocol's object endpoints: which blobs and chunks a writer must upload (`blobs/check`,
 * `chunks/check`, `chunks/uploaded`: dedup never grants access), and the blobs' chunk lists and the chunks'
 * bytes or links for readers (`blobs/info`, `chunks/download`).
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Effect, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { ServerConfig } from "../Config.ts"
import { reachableChunks, readChunks, readInOrder } from "../content/ChunkReads.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { callerPolicy, readableBlobsOf, readableChunksOf } from "../path-permissions/CallerPolicy.ts"
import { dedupScope } from "../path-permissions/DedupScope.ts"
import { ChunkLinks, requestOrigin } from "./ChunkLinks.ts"
import { checkHashList, readableRepository, toBlobData } from "./SyncWire.ts"

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

export const objectHandlers = Effect.gen(function*() {
  const authorizer = yield* Authorizer
  const objects = yield* ContentObjects
  const chunkStore = yield* ChunkStore
  const services = Effect.provideService(ContentObjects, objects)
  const links = yield* ChunkLinks
  const config = yield* ServerConfig
  const originOf = (request: HttpServerRequest.HttpServerRequest) => requestOrigin(request.headers, config.siteUrl)
  const readable = readableRepository(authorizer)

  const blobsCheck = HttpApiBuilder.handler(GroveApi, "sync", "blobsCheck", Effect.fnUntraced(function*({ params, payload }) {
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
  }))
  const blobsInfo = HttpApiBuilder.handler(GroveApi, "sync", "blobsInfo", Effect.fnUntraced(function*({ params, payload }) {
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
  }))
  const chunksCheck = HttpApiBuilder.handler(GroveApi, "sync", "chunksCheck", Effect.fnUntraced(function*({ params, payload }) {
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
  }))
  const chunksDownload = HttpApiBuilder.handler(GroveApi, "sync", "chunksDownload", Effect.fnUntraced(function*({ params, payload, request }) {
    const repo = yield* readable(params.owner, params.name)
    const inRepo = yield* dbUnavailable(reachableChunks(repo.id, repo.orgId, payload.hashes))
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
  }))
  const chunksUploaded = HttpApiBuilder.handler(GroveApi, "sync", "chunksUploaded", Effect.fnUntraced(function*({ params, payload }) {
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
  }))
  return { blobsCheck, blobsInfo, chunksCheck, chunksDownload, chunksUploaded }
})
