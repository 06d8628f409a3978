/**
 * Binary chunk downloads (sync protocol), outside the JSON contract:
 * - `POST /api/{owner}/{name}/chunks/fetch`: JSON `{hashes}` (<= 10,000) answered with frames
 *   `u32 BE hash length, hash, u32 BE data length, data`, streamed, for every chunk the caller may read, in request
 *   order (Grove's binary download), located and checked a slice at a time (`fetchSlices`). With `compression: "zstd_v1"` a frame's data is zstd when that shrinks the chunk
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
import type { SqlError } from "effect/sql/SqlError"
import { ChunkLinks } from "./ChunkLinks.ts"
import { type ChunkReadError, ChunkStore } from "../content/ChunkStore.ts"
import { locateReachable, readInOrder } from "../content/ChunkReads.ts"
import { Repositories } from "../access/Repositories.ts"
import { callerPolicy, readableChunksOf } from "../path-permissions/CallerPolicy.ts"
import { BATCH } from "../db/Batches.ts"
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

/** The frames of `read`'s chunks, raw or zstd'd (`compress`), bare (no hash) or hashed, as the response's body. */
const frameStream = <E>(read: Stream.Stream<Frames.Frame, E>, compress: boolean, bare: boolean) => {
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
        ...(compress ? { [ChunkCompression.RESPONSE_HEADER]: ChunkCompression.ZSTD_V1 } : {}),
        ...(bare ? { [Frames.HEADER]: Frames.BARE_V1 } : {})
      }
    }
  )
}

/**
 * A keyed fetch is located and checked a slice at a time, each slice's chunks read and sent before the next is
 * located: the first small, so the first bytes go out after ~256 probes instead of the whole request's (a clone sends
 * three requests of ~2,000 hashes at once, and their statements ran one after another on the embedded database's
 * one connection before any answer's first read: first headers 74 -> 31 ms quiet, R18). The rest in slices of one
 * statement each (db/Batches' BATCH).
 */
export const FIRST_SLICE = 256
const SLICE = BATCH

/** `hashes` cut in the slices a keyed fetch locates one at a time: FIRST_SLICE, then SLICE each. */
export const fetchSlices = <A>(hashes: ReadonlyArray<A>): Array<ReadonlyArray<A>> => {
  const slices: Array<ReadonlyArray<A>> = []
  for (let at = 0, end = FIRST_SLICE; at < hashes.length; at = end, end += SLICE) slices.push(hashes.slice(at, end))
  return slices
}

/**
 * A keyed fetch's answer: `sliceChunks` locates and checks one slice and reads its chunks. The first slice before the
 * answer starts, so a database that fails there still answers 503. A later slice is located only once the slices
 * before it are read and sent, and its failure breaks the answer part-way (the connection closes, not a clean end):
 * the client asks again for the chunks it did not get (Download's resume).
 */
export const slicedAnswer = <E, R>(
  hashes: ReadonlyArray<string>,
  sliceChunks: (slice: ReadonlyArray<string>) => Effect.Effect<Stream.Stream<Frames.Frame, ChunkReadError>, E | SqlError, R>,
  compress: boolean,
  bare: boolean
) =>
  Effect.gen(function*() {
    const [first = [], ...rest] = fetchSlices(hashes)
    const firstChunks = yield* dbUnavailable(sliceChunks(first))
    const context = yield* Effect.context<R>()
    const later = Stream.fromIterable(rest).pipe(Stream.flatMap((slice) => Stream.unwrap(sliceChunks(slice))), Stream.provideContext(context))
    return frameStream(Stream.concat(firstChunks, later), compress, bare)
  })

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
    const located = yield* dbUnavailable(chunks.locate(repo.orgId, parsed.hashes))
    return frameStream(readInOrder(chunks, repo.orgId, parsed.hashes, located), compress, bare)
  }
  const { repo, caller } = yield* routeRepository("read")
  const policy = yield* callerPolicy(caller, repo)
  /** A slice's chunks in request order: those a blob of the repository reaches (located in the same statement), less content withheld by path permissions, as chunks the repository does not have. */
  const sliceChunks = Effect.fnUntraced(function*(slice: ReadonlyArray<string>) {
    const located = yield* locateReachable(repo.id, repo.orgId, slice)
    const allowed = yield* readableChunksOf(policy, repo, [...located.keys()])
    return readInOrder(chunks, repo.orgId, slice.filter((h) => allowed.has(h)), located)
  })
  return yield* slicedAnswer(parsed.hashes, sliceChunks, compress, bare)
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
