/**
 * Binary chunk uploads (sync protocol), outside the JSON contract:
 * - `PUT  /api/{owner}/{name}/chunks/{hash}`: one chunk, raw or zstd, <= 64 MiB.
 * - `POST /api/{owner}/{name}/chunks/batch`: frames `u32 BE hash length, hash, u32 BE data length, data`,
 *   <= 256 entries and <= 64 MiB; parsed as they stream in, one chunk in memory at a time.
 * Every received chunk is re-hashed before it is stored. Grove's own client may send bare frames (core's Frames: no
 * hash in a frame, the receiver takes it from the bytes), named by the content type `Frames.BARE_CONTENT_TYPE`.
 * Downloads are in `ChunkFetchRoutes`; `ChunkRoutes` is both.
 */
import { ApiErrors, ApiParams } from "@grove/api"
import * as ChunkCompression from "@grove/core/objects/ChunkCompression"
import * as Frames from "@grove/core/objects/Frames"
import { Effect, Layer, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { INLINE_MAX, type UploadedChunk } from "../content/ChunkStore.ts"
import { storeUploaded } from "../content/ChunkUploads.ts"
import { uploader } from "../path-permissions/DedupScope.ts"
import { contentFailure } from "../content/ContentFailures.ts"
import { CHUNK_UPLOAD_LIMIT } from "../http/BodyLimits.ts"
import { isBodyTooLarge } from "../http/ContentEncoding.ts"
import { routeParams } from "../http/PathParams.ts"
import { answer, readBody, routeRepository } from "../http/RawRoutes.ts"
import { ChunkFetchRoutes } from "./ChunkFetchRoutes.ts"

/** One chunk or one batch: the limit the edge (`BodyLimits`) already applies to these routes. */
const MAX_UPLOAD = CHUNK_UPLOAD_LIMIT
const MAX_BATCH_ENTRIES = 256
/** Bytes of small chunks stored per database round trip: the largest chunk's size. */
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

export const ChunkRoutes = Layer.mergeAll(putChunk, batch, ChunkFetchRoutes)
