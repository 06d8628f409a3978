/**
 * Binary chunk uploads (sync protocol), outside the JSON contract:
 * - `PUT  /api/{owner}/{name}/chunks/{hash}`: one chunk, raw or zstd, <= 64 MiB.
 * - `POST /api/{owner}/{name}/chunks/batch`: frames `u32 BE hash length, hash, u32 BE data length, data`,
 *   <= 256 entries and <= 64 MiB; split as the body streams in, held a group of small chunks at a time.
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
import { discardBody, isBodyTooLarge } from "../http/ContentEncoding.ts"
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

const tooLarge = () => new ApiErrors.PayloadTooLarge({ error: `a batch must be at most ${MAX_UPLOAD} bytes`, code: "payload_too_large" })

/** A failure reading a batch's body or its frames, as the answer says it. */
const batchFailure = (error: unknown): ApiErrors.PayloadTooLarge | ApiErrors.BadRequest =>
  error instanceof ApiErrors.PayloadTooLarge || error instanceof ApiErrors.BadRequest
    ? error
    : isBodyTooLarge(error)
    // A zstd body (http/ContentEncoding) that decompresses past the limit.
    ? tooLarge()
    : new ApiErrors.BadRequest({ error: `invalid batch: ${error instanceof Error ? error.message : String(error)}`, code: "invalid_batch" })

/** A bare frame as a chunk: named by the hash of its plain bytes, marked verified (see UploadedChunk). */
const namedChunk = (frame: Frames.BareFrame): UploadedChunk => ({ ...ChunkCompression.namedBareFrame(frame, Frames.MAX_FRAME_DATA), verified: true })

const batch = HttpRouter.add("POST", "/api/:owner/:name/chunks/batch", answer(Effect.gen(function*() {
  const { caller, repo } = yield* routeRepository("write")
  const scope = uploader(caller, repo)
  const request = yield* HttpServerRequest.HttpServerRequest
  const declared = Number(request.headers["content-length"] ?? NaN)
  if (Number.isFinite(declared) && declared > MAX_UPLOAD) return yield* tooLarge()
  let total = 0
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
  // Frames are split synchronously as the body's parts come (core's splitters: a frame that lies within a part is a
  // view of it, no copy and no promise per frame), then taken one at a time: a bare frame is decompressed and
  // hashed only when its turn comes, so a part holding many frames (a zstd body is one part) holds no more plain
  // bytes than a group. A frame past the entry limit stops the split.
  const arrived: Array<Frames.BareFrame | Frames.Frame> = []
  const admit = (frame: Frames.BareFrame | Frames.Frame) => {
    if (++entries > MAX_BATCH_ENTRIES) throw new ApiErrors.BadRequest({ error: `at most ${MAX_BATCH_ENTRIES} chunks per batch`, code: "too_many" })
    arrived.push(frame)
  }
  const bare = request.headers["content-type"] === Frames.BARE_CONTENT_TYPE
  const splitter = bare ? Frames.bareFrameSplitter(admit) : Frames.frameSplitter(admit)
  const take = Effect.gen(function*() {
    for (const frame of arrived.splice(0)) {
      let chunk: UploadedChunk
      try {
        chunk = "hash" in frame ? frame : namedChunk(frame)
      } catch (error) {
        return yield* Effect.fail(batchFailure(error))
      }
      if (chunk.data.length > INLINE_MAX) {
        yield* contentFailure(storeUploaded(repo.orgId, scope, [chunk]))
        continue
      }
      group.push(chunk)
      groupBytes += chunk.data.length
      if (groupBytes >= GROUP_BYTES) yield* flush
    }
  })
  yield* request.stream.pipe(
    Stream.mapError(batchFailure),
    Stream.runForEach((part) => {
      total += part.length
      if (total > MAX_UPLOAD) return Effect.fail(tooLarge())
      return Effect.andThen(Effect.try({ try: () => splitter.push(part), catch: batchFailure }), take)
    })
  )
  yield* Effect.try({ try: () => splitter.end(), catch: batchFailure })
  yield* flush
  // Every chunk is stored: a zstd body's plain bytes go back now (ContentEncoding.discardBody), not at a full GC.
  discardBody(request)
  return HttpServerResponse.jsonUnsafe({ ok: true, received: entries })
})))

export const ChunkRoutes = Layer.mergeAll(putChunk, batch, ChunkFetchRoutes)
