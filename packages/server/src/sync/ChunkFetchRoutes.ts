/**
 * Binary chunk downloads (sync protocol), outside the JSON contract:
 * - `POST /api/{owner}/{name}/chunks/fetch`: JSON `{hashes}` (<= 10,000) answered with frames
 *   `u32 BE hash length, hash, u32 BE data length, data`, streamed, for every chunk the caller may read, in request
 *   order (Grove's binary download). With `compression: "zstd_v1"` a frame's data is zstd when that shrinks the chunk
 *   (`ChunkCompression`), and the answer says so in a header; without it (the Oak client) every frame is raw. With
 *   `tokens` (one per hash) and no key, the links `chunks/download` handed out (ChunkLinks) authorize
 *   instead: the Oak client's batch URL.
 * - `GET /api/{owner}/{name}/chunks/fetch/{hash}?t=…`: one chunk's bytes, authorized by its link.
 * Grove's own client may ask bare frames (`frames: "bare_v1"`, core's Frames: no hash in a frame, the receiver takes it
 * from the bytes); the answer's header of that name says they came.
 */
import { ApiErrors, ApiParams } from "@grove/api"
import * as ChunkCompression from "@grove/core/objects/ChunkCompression"
import * as Frames from "@grove/core/objects/Frames"
import { type Array as Arr, Effect, Layer, Option, Schema, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { ChunkLinks } from "./ChunkLinks.ts"
import { type ChunkLocation, ChunkStore } from "../content/ChunkStore.ts"
import { locateReachable, readInOrder } from "../content/ChunkReads.ts"
import { Repositories } from "../access/Repositories.ts"
import { callerPolicy, readableChunksOf } from "../path-permissions/CallerPolicy.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { routeParams } from "../http/PathParams.ts"
import { answer, ownerRepo, readBody, routeRepository } from "../http/RawRoutes.ts"
import { checkHashList } from "./SyncHandlers.ts"

const MAX_FETCH = 10_000

const chunkParams = routeParams({ hash: ApiParams.Hash })

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

/**
 * Largest buffer an answer is joined into: under malloc's mmap threshold (fixed at 128 KiB by grove-server's
 * tunables), so a joined buffer comes from malloc's arena and is reused, not a fresh mapping.
 */
const WRITE_BYTES = 64 * 1024

/**
 * An answer's pieces as the buffers to write: neighbours joined up to `max` bytes, a piece of `max` or more alone,
 * as it is (no copy). NodeHttpServer joins every array a stream emits into one buffer (Buffer.concat), so the frames
 * of a 2 MiB read group became a 2 MiB mapping each, faulted in and unmapped again: emitted one buffer at a time,
 * nothing is joined past `max`.
 */
export const writeSized = (pieces: ReadonlyArray<Uint8Array>, max = WRITE_BYTES): Array<Uint8Array> => {
  const out: Array<Uint8Array> = []
  let run: Array<Uint8Array> = []
  let bytes = 0
  const flush = () => {
    if (run.length === 1) out.push(run[0]!)
    else if (run.length > 1) out.push(Buffer.concat(run, bytes))
    run = []
    bytes = 0
  }
  for (const piece of pieces) {
    if (piece.length >= max) {
      flush()
      out.push(piece)
      continue
    }
    if (bytes + piece.length > max) flush()
    run.push(piece)
    bytes += piece.length
  }
  flush()
  return out
}

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
    // Framed an array of chunks at a time (each gives a header and its data, so never none): a stream per chunk cost
    // ~2 µs a chunk more (5,000 chunks: 12 vs 4 ms of CPU). Then one buffer per emitted array (writeSized).
    sent.pipe(
      Stream.mapArray((chunks) => writeSized(chunks.flatMap(encode)) as unknown as Arr.NonEmptyReadonlyArray<Uint8Array>),
      Stream.rechunk(1)
    ),
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
  // The chunks a blob of the repository reaches, located in the same statement.
  const located = yield* dbUnavailable(locateReachable(repo.id, repo.orgId, parsed.hashes))
  // Chunks of content withheld by path permissions are left out, like chunks the repository does not have.
  const allowed = yield* readableChunksOf(yield* callerPolicy(caller, repo), repo, [...located.keys()])
  const wanted = parsed.hashes.filter((h) => allowed.has(h))
  return frameStream(chunks, repo.orgId, wanted, located, compress, bare)
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

export const ChunkFetchRoutes = Layer.mergeAll(fetch, fetchOne)
