/**
 * Binary chunk transfer (sync protocol), outside the JSON contract:
 * - `PUT  /api/{owner}/{name}/chunks/{hash}`: one chunk, raw or zstd, <= 64 MiB.
 * - `POST /api/{owner}/{name}/chunks/batch`: frames `u32 BE hash length, hash, u32 BE data length, data`,
 *   <= 256 entries and <= 64 MiB; parsed as they stream in, one chunk in memory at a time.
 * - `POST /api/{owner}/{name}/chunks/fetch`: JSON `{hashes}` (<= 10,000) answered with the same frames,
 *   streamed, for every chunk the caller may read, in request order (Grove's binary download). With
 *   `compression: "zstd_v1"` a frame's data is zstd when that shrinks the chunk (`ChunkCompression`),
 *   and the answer says so in a header; without it (the Oak client) every frame is raw. With
 *   `tokens` (one per hash) and no key, the links `chunks/download` handed out (ChunkLinks) authorize
 *   instead: the Oak client's batch URL.
 * - `GET /api/{owner}/{name}/chunks/fetch/{hash}?t=…`: one chunk's bytes, authorized by its link.
 * Every received chunk is re-hashed before it is stored.
 * Grove's own client may use bare frames instead (`chunk_frames: "bare_v1"`, core's Frames): no hash in
 * a frame, the receiver takes it from the bytes. An upload names them by its content type
 * (`Frames.BARE_CONTENT_TYPE`); a fetch asks with `frames: "bare_v1"` and the answer's header of that name says they came.
 */
import { ApiErrors, ApiParams } from "@grove/api"
import * as ChunkCompression from "@grove/core/objects/ChunkCompression"
import * as Frames from "@grove/core/objects/Frames"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { ChunkLinks } from "./ChunkLinks.ts"
import { type ChunkLocation, ChunkStore, INLINE_MAX, readInOrder, type UploadedChunk } from "../content/ChunkStore.ts"
import { Repositories } from "../access/Repositories.ts"
import { storeUploaded } from "../content/ChunkUploads.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { callerPolicy, readableChunksOf } from "../path-permissions/CallerPolicy.ts"
import { uploader } from "../path-permissions/DedupScope.ts"
import { contentFailure } from "../content/ContentFailures.ts"
import { CHUNK_UPLOAD_LIMIT } from "../http/BodyLimits.ts"
import { isBodyTooLarge } from "../http/ContentEncoding.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { routeParams } from "../http/PathParams.ts"
import { answer, ownerRepo, readBody, routeRepository } from "../http/RawRoutes.ts"
import { checkHashList } from "./SyncHandlers.ts"

/** One chunk or one batch: the limit the edge (`BodyLimits`) already applies to these routes. */
const MAX_UPLOAD = CHUNK_UPLOAD_LIMIT
const MAX_BATCH_ENTRIES = 256
const MAX_FETCH = 10_000
/** Bytes of small chunks stored or read per database round trip: the largest chunk's size. */
const GROUP_BYTES = 4 * 1024 * 1024

const chunkParams = routeParams({ hash: ApiParams.Hash })

const putChunk = HttpRouter.add("PUT", "/api/:owner/:name/chunks/:hash", answer(Effect.gen(function*() {
  const { hash } = yield* chunkParams
  const { caller, repo } = yield* routeRepository("write")
  const body = yield* readBody(MAX_UPLOAD)
  // Uploaded (verified bytes): present for this caller from now on, even if the organization had them already.
  yield* contentFailure(storeUploaded(repo.orgId, uploader(caller, repo), [{ hash, data: body }]))
  return HttpServerResponse.empty({ status: 200 })
})))

/**
 * Bare frames as hashed ones: each chunk's plain bytes and their hash, marked verified (the hash was just
 * taken from these very bytes, so ChunkStore does not hash them again, nor try plain bytes that begin
 * with the zstd magic as zstd).
 */
async function* verifiedBareFrames(body: AsyncIterable<Uint8Array>): AsyncGenerator<UploadedChunk> {
  for await (const chunk of ChunkCompression.hashedBareFrames(body, Frames.MAX_FRAME_DATA)) yield { ...chunk, verified: true }
}

const batch = HttpRouter.add("POST", "/api/:owner/:name/chunks/batch", answer(Effect.gen(function*() {
  const { caller, repo } = yield* routeRepository("write")
  const scope = uploader(caller, repo)
  const request = yield* HttpServerRequest.HttpServerRequest
  const declared = Number(request.headers["content-length"] ?? NaN)
  if (Number.isFinite(declared) && declared > MAX_UPLOAD) {
    return yield* new ApiErrors.PayloadTooLarge({ error: `a batch must be at most ${MAX_UPLOAD} bytes`, code: "payload_too_large" })
  }
  let total = 0
  const limited = request.stream.pipe(
    Stream.mapEffect((part) => {
      total += part.length
      return total > MAX_UPLOAD
        ? Effect.fail(new ApiErrors.PayloadTooLarge({ error: `a batch must be at most ${MAX_UPLOAD} bytes`, code: "payload_too_large" }))
        : Effect.succeed(part)
    })
  )
  const body = Stream.toAsyncIterable(limited)
  const frames: AsyncIterator<UploadedChunk> =
    (request.headers["content-type"] === Frames.BARE_CONTENT_TYPE ? verifiedBareFrames(body) : Frames.decodeFrames(body))[Symbol.asyncIterator]()
  let entries = 0
  // Small chunks are stored a group at a time (one insert); the group never holds more than one
  // largest chunk's worth of bytes, and a large chunk is stored as soon as it has arrived.
  let group: Array<UploadedChunk> = []
  let groupBytes = 0
  const flush = Effect.suspend(() => {
    const pending = group
    group = []
    groupBytes = 0
    // Uploaded (verified bytes): present for this caller from now on, even if the organization had them already.
    return pending.length === 0 ? Effect.void : contentFailure(storeUploaded(repo.orgId, scope, pending))
  })
  for (;;) {
    const next = yield* Effect.tryPromise({
      try: () => frames.next(),
      catch: (error) =>
        error instanceof ApiErrors.PayloadTooLarge
          ? error
          : isBodyTooLarge(error)
          // A zstd body (http/ContentEncoding) that decompresses past the limit.
          ? new ApiErrors.PayloadTooLarge({ error: `a batch must be at most ${MAX_UPLOAD} bytes`, code: "payload_too_large" })
          : new ApiErrors.BadRequest({ error: `invalid batch: ${error instanceof Error ? error.message : String(error)}`, code: "invalid_batch" })
    })
    if (next.done === true) break
    entries++
    if (entries > MAX_BATCH_ENTRIES) {
      return yield* new ApiErrors.BadRequest({ error: `at most ${MAX_BATCH_ENTRIES} chunks per batch`, code: "too_many" })
    }
    if (next.value.data.length > INLINE_MAX) {
      yield* contentFailure(storeUploaded(repo.orgId, scope, [next.value]))
      continue
    }
    group.push(next.value)
    groupBytes += next.value.data.length
    if (groupBytes >= GROUP_BYTES) yield* flush
  }
  yield* flush
  return HttpServerResponse.jsonUnsafe({ ok: true, received: entries })
})))

const decodeFetchRequest = Schema.decodeUnknownSync(Schema.Struct({
  hashes: Schema.Array(Schema.String),
  tokens: Schema.optionalKey(Schema.Array(Schema.String)),
  compression: Schema.optionalKey(Schema.Literal(ChunkCompression.ZSTD_V1)),
  frames: Schema.optionalKey(Schema.String)
}))

/** Chunks this large are compressed on the thread pool, a few at once; small ones inline (a pool trip costs more). */
const ASYNC_COMPRESS_FROM = 256 * 1024

/** A chunk and the bytes to send for it (`sent` is `data` itself when it goes raw). */
interface Outgoing extends Frames.Frame {
  readonly sent: Uint8Array
}

const compressed = (chunk: Frames.Frame): Effect.Effect<Outgoing> =>
  chunk.data.length >= ASYNC_COMPRESS_FROM
    ? Effect.map(Effect.promise(() => ChunkCompression.encodeChunkAsync(chunk.data)), (sent) => ({ ...chunk, sent }))
    : Effect.sync(() => ({ ...chunk, sent: ChunkCompression.encodeChunk(chunk.data) }))

const badLink = new ApiErrors.Unauthorized({ error: "the chunk link is invalid or has expired; ask chunks/download again", code: "invalid_link" })

/** The repository a link names; links authorize by themselves, so no caller is looked up. */
const linkedRepository = Effect.gen(function*() {
  const { owner, name } = yield* ownerRepo
  const found = yield* dbUnavailable((yield* Repositories).findByFullName(owner, name))
  if (Option.isNone(found)) return yield* badLink
  return found.value
})

const frameStream = (
  chunks: ChunkStore["Service"],
  orgId: string,
  hashes: ReadonlyArray<string>,
  located: ReadonlyMap<string, ChunkLocation>,
  compress: boolean,
  bare: boolean
) => {
  // Read in bounded groups (one range read for neighbours in a pack), framed as they go: memory stays bounded whatever the response size.
  const read = readInOrder(chunks, orgId, hashes, located)
  const sent = compress ? read.pipe(Stream.mapEffect(compressed, { concurrency: 4 })) : read.pipe(Stream.map((c): Outgoing => ({ ...c, sent: c.data })))
  const encode = (c: Outgoing) =>
    bare ? Frames.encodeBareFrames([ChunkCompression.bareFrame(c.data, c.sent)]) : Frames.encodeFrames([{ hash: c.hash, data: c.sent }])
  return HttpServerResponse.stream(
    sent.pipe(Stream.flatMap((chunk) => Stream.fromIterable(encode(chunk)))),
    {
      contentType: "application/octet-stream",
      headers: {
        "x-grove-chunk-count": String(hashes.filter((h) => located.has(h)).length),
        ...(compress ? { [ChunkCompression.RESPONSE_HEADER]: ChunkCompression.ZSTD_V1 } : {}),
        ...(bare ? { [Frames.HEADER]: Frames.BARE_V1 } : {})
      }
    }
  )
}

const fetch = HttpRouter.add("POST", "/api/:owner/:name/chunks/fetch", answer(Effect.gen(function*() {
  // The path first: a malformed owner or name answers 400 before the body is read.
  yield* ownerRepo
  const chunks = yield* ChunkStore
  const objects = yield* ContentObjects
  const request = yield* HttpServerRequest.HttpServerRequest
  const body = yield* readBody(2 * 1024 * 1024)
  const parsed = yield* Effect.try({
    try: () => decodeFetchRequest(JSON.parse(new TextDecoder().decode(body))),
    catch: () =>
      new ApiErrors.BadRequest({ error: "the body must be JSON {\"hashes\": [...], \"compression\"?: \"zstd_v1\"}", code: "invalid_request" })
  })
  yield* checkHashList(parsed.hashes, MAX_FETCH)
  const compress = parsed.compression === ChunkCompression.ZSTD_V1
  // Another format asked for (a newer client): the frames every client reads.
  const bare = parsed.frames === Frames.BARE_V1
  if (parsed.tokens !== undefined && request.headers["authorization"] === undefined) {
    // The Oak client's batch URL: each hash carries the token of its own link.
    const links = yield* ChunkLinks
    const repo = yield* linkedRepository
    if (parsed.tokens.length !== parsed.hashes.length) {
      return yield* new ApiErrors.BadRequest({ error: "tokens must list one token per hash", code: "invalid_request" })
    }
    if (!parsed.hashes.every((h, i) => links.check(repo.id, h, parsed.tokens![i]!))) return yield* badLink
    return frameStream(chunks, repo.orgId, parsed.hashes, yield* dbUnavailable(chunks.locate(repo.orgId, parsed.hashes)), compress, bare)
  }
  const { repo, caller } = yield* routeRepository("read")
  const inRepo = yield* dbUnavailable(objects.readableChunks(repo.id, repo.orgId, parsed.hashes))
  // Chunks of content withheld by path permissions are left out, like chunks the repository does not have.
  const allowed = yield* readableChunksOf(yield* callerPolicy(caller, repo), repo, [...inRepo])
  const wanted = parsed.hashes.filter((h) => allowed.has(h))
  return frameStream(chunks, repo.orgId, wanted, yield* dbUnavailable(chunks.locate(repo.orgId, wanted)), compress, bare)
})))

const fetchOne = HttpRouter.add("GET", "/api/:owner/:name/chunks/fetch/:hash", answer(Effect.gen(function*() {
  const { hash } = yield* chunkParams
  const repo = yield* linkedRepository
  const request = yield* HttpServerRequest.HttpServerRequest
  const token = new URL(request.url, "http://link").searchParams.get("t") ?? ""
  if (!(yield* ChunkLinks).check(repo.id, hash, token)) return yield* badLink
  const chunks = yield* ChunkStore
  const location = (yield* dbUnavailable(chunks.locate(repo.orgId, [hash]))).get(hash)
  if (location === undefined) return yield* new ApiErrors.NotFound({ error: `chunk ${hash} not found`, code: "not_found" })
  return HttpServerResponse.stream(chunks.readAt(repo.orgId, location), {
    contentType: "application/octet-stream",
    contentLength: location.size
  })
})))

export const ChunkRoutes = Layer.mergeAll(putChunk, batch, fetch, fetchOne)
