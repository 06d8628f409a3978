/**
 * Sending blobs before a push: ask which large blobs (10 MiB and more) the
 * server lacks (`blobs/check`) and cut those into FastCDC chunks, ask which
 * chunks it lacks (`chunks/check`; the organization dedups), and upload those
 * in binary batches (<= 256 entries, <= 16 MiB each, three in
 * flight). The small files' chunks are asked about at once, and their batches go while the large files are still
 * checked and cut. Chunk bytes are read from the files when a batch is sent, straight into the batch's body, so
 * memory stays bounded by the batches in flight. When the server advertises
 * `chunk_compression: zstd_v1`, each chunk goes zstd-compressed if that shrinks
 * it (`ChunkCompression`); the server verifies the hash of the plain bytes. One that also takes zstd request
 * bodies (`body_compression: zstd_v1`) gets a batch's plain frames as one zstd stream (`Content-Encoding: zstd`)
 * instead. A server advertising `chunk_frames: bare_v1` gets frames without the hash (it takes the hash from the
 * bytes); a batch a node answers 400 (an older node behind the same address) goes again as plain hashed frames, as
 * every later one.
 *
 * A push of only small blobs, 64 KiB or less in all, sends them without `chunks/check` (one round trip fewer).
 *
 * A small blob is its own one chunk (its hash is the chunk's), and the server registers a blob a pushed tree
 * references from such a chunk the caller uploaded or may read (PushPreparation): so small blobs skip
 * `blobs/check` (their hashes went twice, 0.17 MiB of a 5,000-file push) and are not listed in the push.
 */
import * as ApiSync from "@grove/api/Sync"
import { Objects } from "@grove/core"
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import { Deferred, Effect, Fiber, Schema } from "effect"
import { CliFailure, failure } from "../Failures.ts"
import { mapLimit } from "../local/WorkingTree.ts"
import { ACCEPT_ENCODING, bodyCompressionEnabled, capabilitiesOf, downloadCompression, squeezeBody } from "./BodyCompression.ts"
import type { ChunkSource, OutgoingBlob } from "./Outgoing.ts"
import {
  batchesOf,
  COMPRESS_CHUNKS_FROM,
  HASHED_FRAMES_TYPE,
  hashedBatch,
  isLarge,
  sendsUnasked,
  uniqueBlobs,
  wholeChunk
} from "./Outgoing.ts"
import type { ReadBatch, ReadChunk } from "./ChunkReads.ts"
import { chunkFile, readBatch } from "./ChunkReads.ts"
import { plainDecoder, REFUSED } from "./PlainDecode.ts"
import type { Progress } from "./Progress.ts"
import { makeProgress } from "./Progress.ts"
import type { RemoteRepo } from "./RemoteRepo.ts"
import { bareFrames, transfer, uploadCompression } from "./RemoteRepo.ts"

export type { OutgoingBlob }
export { chunkFile, readRange } from "./ChunkReads.ts"

const CHECK_PAGE = 10_000
const IN_FLIGHT = 3
/** Chunks this large compress on the thread pool, several at once; smaller ones inline (a pool trip costs more). */
const ASYNC_FROM = 256 * 1024
/** Files cut (read and hashed) at once. */
const CUT_AT_ONCE = 3
/** Large files cut before blobs/check answers, at most this many bytes of them: the server may have them all. */
const EARLY_BYTES = 256 * 1024 * 1024

const pages = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

export interface UploadResult {
  /** The large blobs the server did not have, as the push lists them (chunk references, no inline content); small ones are their chunks. */
  readonly blobs: ReadonlyArray<ApiSync.BlobData>
  readonly uploadedChunks: number
  /** Plain bytes of the uploaded chunks. */
  readonly uploadedBytes: number
  /** Bytes of the batch bodies as sent (less than `uploadedBytes` when chunks went compressed). */
  readonly sentBytes: number
}

/**
 * What the server takes: zstd-compressed chunks (`chunk_compression: zstd_v1`) and bare frames
 * (`chunk_frames: bare_v1`); an older one does not say so.
 */
const serverTakes = (remote: RemoteRepo) =>
  Effect.map(Effect.promise(() => capabilitiesOf(remote.site, remote.token)), (flags) => ({
    compress: uploadCompression() && flags[Objects.ChunkCompression.CAPABILITY] === Objects.ChunkCompression.ZSTD_V1,
    // zstd request bodies cover chunks/batch wherever they are advertised (since they exist).
    wholeBody: uploadCompression() && bodyCompressionEnabled() && flags[BodyCompression.CAPABILITY] === BodyCompression.ZSTD_V1,
    bare: bareFrames() && flags[Objects.Frames.CAPABILITY] === Objects.Frames.BARE_V1
  }))

interface BatchBody {
  readonly body: Uint8Array
  readonly contentEncoding?: "zstd"
}

/**
 * The push's blob list, handed over while the chunks upload: once the large files are cut and a first batch has
 * answered (the list is final then: batches only succeed or fail), so the caller builds the push body meanwhile
 * (commands/Push.ts).
 */
export type OnBlobs = (blobs: ReadonlyArray<ApiSync.BlobData>) => void

const checkDecoder = plainDecoder(ApiSync.ChunkCheckResponse)

/**
 * `chunks/check` as the typed client's `sync.chunksCheck` sends it (same route, JSON body, zstd body to a server that
 * takes it, accepted encodings, retries and error mapping: RemoteRepo.sendBinary), but its body made by JSON.stringify
 * and its answer read by the schema's compiled plain decoder (PlainDecode.ts): the schema's own encode and decode of a
 * 5,000-hash page cost ~15-80 ms each in a one-shot process (cold), JSON.stringify < 1 ms. The hashes are this
 * checkout's own, so the encode's checks had nothing to find.
 */
const chunksCheck = (remote: RemoteRepo, page: ReadonlyArray<ChunkSource>): Effect.Effect<typeof ApiSync.ChunkCheckResponse.Type, CliFailure> =>
  Effect.flatMap(
    transfer("chunks/check failed", async () => {
      const hashes = page.map((c) => c.hash)
      const body = new TextEncoder().encode(JSON.stringify({ hashes, sizes: page.map((c) => c.size), chunk_batch_protocol: "bounded_v1" }))
      const squeezed = await squeezeBody(remote.site, remote.token, body)
      return remote.sendBinary("chunks/check", {
        method: "POST",
        body: squeezed ?? body,
        contentType: "application/json",
        ...(squeezed === undefined ? {} : { contentEncoding: "zstd" }),
        acceptEncoding: downloadCompression(remote.site) ? ACCEPT_ENCODING : undefined
      })
    }),
    (answer) => {
      let json: unknown
      try {
        json = JSON.parse(Buffer.from(answer.body.buffer, answer.body.byteOffset, answer.body.length).toString("utf8"))
      } catch {
        return failure(`unexpected answer from ${remote.site} (is it a Grove server of a compatible version?)`, "bad_response")
      }
      const decoded = checkDecoder === undefined ? REFUSED : checkDecoder(json)
      // Refused (or no plain decoder): the schema's own decoder, which says what is wrong.
      return decoded === REFUSED ? remote.connection.call(Schema.decodeUnknownEffect(ApiSync.ChunkCheckResponse)(json)) : Effect.succeed(decoded)
    }
  )

/** The options of a server that takes none of them (a push too small to ask `capabilities` for). */
const TAKES_NOTHING = { compress: false, wholeBody: false, bare: false }

export const uploadBlobs = Effect.fn("Upload.blobs")(function*(
  remote: RemoteRepo,
  outgoing: ReadonlyArray<OutgoingBlob>,
  onBlobs?: OnBlobs
) {
  const { call, client } = remote.connection
  const params = { owner: remote.owner, name: remote.name }
  const unique = uniqueBlobs(outgoing)
  const small = unique.filter((b) => !isLarge(b))
  const large = unique.filter(isLarge)
  const smallSources = small.map(wholeChunk)
  const unasked = sendsUnasked(large.length > 0, smallSources)
  // Large files are cut while blobs/check is on its way (most of them are missing when they are new), a few at a
  // time and up to EARLY_BYTES; once the check answers only missing ones are still cut, and a failed check stops them.
  // With small files to ask about, the cut (CPU on this thread) waits until their first batch is on its way, or until
  // their chunks/check answered when they will wait for the large files' chunks (`openCut`).
  let budget = EARLY_BYTES
  const earlyBlobs = unique.filter((b) => isLarge(b) && (budget -= b.size) >= 0)
  let wanted = (_hash: string) => true
  const early = new Map<string, Array<ApiSync.ChunkRefData> | Error>()
  let openCut = () => {}
  const cutGate = unasked || small.length === 0 ? Promise.resolve() : new Promise<void>((resolve) => (openCut = resolve))
  const earlyDone = cutGate.then(() =>
    mapLimit(earlyBlobs, CUT_AT_ONCE, async (b) => {
      // A read error matters only if the server lacks the blob: kept, thrown below when it does.
      if (wanted(b.hash)) early.set(b.hash, await chunkFile(b).catch((e) => e instanceof Error ? e : new Error(String(e))))
    })
  )
  /** The chunks of `list` the server lacks (chunks/check, in pages), in the order asked. */
  const missingOf = (list: ReadonlyArray<ChunkSource>) =>
    Effect.gen(function*() {
      const bySource = new Map(list.map((c) => [c.hash, c]))
      const needed: Array<ChunkSource> = []
      for (const page of pages(list, CHECK_PAGE)) {
        const answer = yield* chunksCheck(remote, page)
        for (const { hash } of answer.missing) {
          const source = bySource.get(hash)
          if (source !== undefined) needed.push(source)
        }
      }
      return needed
    })
  const blobs: Array<ApiSync.BlobData> = []
  // The large files: which the server lacks (blobs/check), their chunks, and which of those it lacks. Runs while the
  // small files' chunks are asked about and their batches upload.
  const largePart = Effect.gen(function*() {
    const missing = new Set<string>()
    yield* Effect.forEach(pages(large.map((b) => b.hash), CHECK_PAGE), (page) =>
      Effect.map(call(client.sync.blobsCheck({ params, payload: { hashes: [...page] } })), (answer) => {
        for (const hash of answer.missing) missing.add(hash)
      }), { discard: true }).pipe(Effect.onError(() => Effect.sync(() => (wanted = () => false))))
    wanted = (hash) => missing.has(hash)
    const toSend = large.filter((b) => missing.has(b.hash))
    const lists = yield* transfer("cannot read a file to chunk it", async () => {
      await earlyDone
      return mapLimit(toSend, CUT_AT_ONCE, async (blob) => {
        const chunks = early.get(blob.hash) ?? await chunkFile(blob)
        if (chunks instanceof Error) throw chunks
        return { blob, chunks }
      })
    })
    // A chunk once, and none that is a small file's (those are asked about, and sent, as the small file).
    const sources = new Map<string, ChunkSource>()
    for (const c of smallSources) sources.set(c.hash, c)
    const chunkSources: Array<ChunkSource> = []
    for (const { blob, chunks } of lists) {
      blobs.push({ hash: blob.hash, content: [], size: blob.size, chunks })
      for (const c of chunks) {
        if (sources.has(c.hash)) continue
        const source = { hash: c.hash, file: blob.file, offset: c.offset, size: c.size }
        sources.set(c.hash, source)
        chunkSources.push(source)
      }
    }
    return yield* missingOf(chunkSources)
  })
  // The small files' chunks are asked about at once, alongside blobs/check and the large files' cut, and their full
  // batches upload while those go on: a new tree's first batch no longer waits for its large files to be cut.
  const largeFiber = yield* Effect.forkChild(largePart)
  const smallNeeded = unasked ? smallSources : yield* missingOf(smallSources)
  const smallTotal = smallNeeded.reduce((sum, c) => sum + c.size, 0)
  // Batches are cut from the chunks in order (small files', then large files'), so every small batch but the last is
  // the same whatever the large files add: those go now, the last waits for the large files' chunks to fill it. Only
  // when the small ones alone are worth compressing (capabilities are asked then whatever the large files add).
  const smallBatches = large.length > 0 && smallTotal >= COMPRESS_CHUNKS_FROM ? batchesOf(smallNeeded) : []
  const held = smallBatches.length > 0 ? smallBatches.pop()! : smallNeeded
  const pipelined = smallBatches.length > 0
  const queue: Array<ReadonlyArray<ChunkSource>> = smallBatches
  if (!pipelined) openCut()
  let takes = pipelined ? yield* serverTakes(remote) : TAKES_NOTHING
  // Called once the blob list is final and a first batch answered, when the other batches in flight keep the server
  // busy while the caller's synchronous work runs (not as the batches are posted: it would hold their bodies back from
  // the socket); at once when there is no batch.
  let blobsKnown = false
  let answered = false
  let handedOver = false
  const handOver = () => {
    if (handedOver || !blobsKnown || !answered) return
    handedOver = true
    onBlobs?.(blobs)
  }
  let sentBytes = 0
  let progressed = 0
  let progress: Progress | undefined
  const allQueued = yield* Deferred.make<void>()
  let planned = false
  const encode = (data: Uint8Array): Uint8Array | Promise<Uint8Array> =>
    !takes.compress ? data : data.length >= ASYNC_FROM ? Objects.ChunkCompression.encodeChunkAsync(data) : Objects.ChunkCompression.encodeChunk(data)
  const framed = (chunks: ReadonlyArray<ReadChunk>, sent: ReadonlyArray<Uint8Array>, asBare: boolean) =>
    Buffer.concat(
      asBare
        ? Objects.Frames.encodeBareFrames(chunks.map((f, i) => Objects.ChunkCompression.bareFrame(f.data, sent[i]!)))
        : [hashedBatch(chunks.map((f, i) => ({ hash: f.hash, data: sent[i]! })))]
    )
  /**
   * A batch's body: its plain frames as one zstd stream where the server takes zstd bodies (one context a batch on
   * each side instead of one a chunk, and matches across chunks), else each chunk compressed on its own (or not).
   */
  const bodyOf = async (read: ReadBatch, asBare: boolean, asWhole: boolean): Promise<BatchBody> => {
    const plain = read.chunks.map((c) => c.data)
    const plainBody = () => read.bare === asBare ? read.body : framed(read.chunks, plain, asBare)
    if (asWhole && Objects.ChunkCompression.batchWorthZstd(plain)) {
      const body = plainBody()
      const zstd = await Objects.ChunkCompression.encodeBatchBody(body)
      if (zstd === body) return { body }
      if (zstd !== undefined) return { body: zstd, contentEncoding: "zstd" }
    }
    if (!takes.compress) return { body: plainBody() }
    return { body: framed(read.chunks, await Promise.all(plain.map(encode)), asBare) }
  }
  const sendBatch = (batch: ReadonlyArray<ChunkSource>) =>
    transfer("upload failed", async () => {
      const read = await readBatch(batch, takes.bare)
      const post = async (asBare: boolean, asWhole: boolean) => {
        const { body, contentEncoding } = await bodyOf(read, asBare, asWhole)
        const contentType = asBare ? Objects.Frames.BARE_CONTENT_TYPE : HASHED_FRAMES_TYPE
        const sent = remote.sendBinary("chunks/batch", {
          method: "POST",
          body,
          contentType,
          // A zstd body's plain bytes count against the server's decode budget, which other pushers may fill: its
          // 503 goes per chunk at once (below) rather than waiting for them.
          ...(contentEncoding === undefined ? {} : { contentEncoding, busyFailsAtOnce: true })
        })
        // A batch on its way: the large files' cut may have this thread now.
        openCut()
        await sent
        return body.length
      }
      const status = (error: unknown) => error instanceof CliFailure ? error.details?.["status"] : undefined
      const asBare = takes.bare
      const asWhole = takes.wholeBody
      sentBytes += await post(asBare, asWhole).catch((error: unknown) => {
        // Busy decoding others' zstd bodies: this batch per chunk (which the chunk handler decodes), later ones as before.
        if (asWhole && status(error) === 503) return post(asBare, false)
        // A node that knows neither bare frames nor zstd bodies (an older one behind the same address, mid-upgrade)
        // reads them as hashed frames and answers 400: invalid_batch, or invalid_chunk when the bytes happen to parse
        // as one frame with a garbage hash. This batch again, and every later one, as plain hashed frames.
        if (!(asBare || asWhole) || status(error) !== 400) throw error
        takes = { ...takes, bare: false, wholeBody: false }
        return post(false, false)
      })
      const bytes = batch.reduce((sum, c) => sum + c.size, 0)
      if (progress === undefined) progressed += bytes
      else progress.add(bytes)
      answered = true
      handOver()
    })
  /** Sends queued batches, three at a time (three of these), until the large files' batches are queued and sent. */
  const sender: Effect.Effect<void, CliFailure> = Effect.suspend(() => {
    const next = queue.shift()
    if (next !== undefined) return Effect.flatMap(sendBatch(next), () => sender)
    return planned ? Effect.void : Effect.flatMap(Deferred.await(allQueued), () => sender)
  })
  let needed: ReadonlyArray<ChunkSource> = smallNeeded
  const plan = Effect.gen(function*() {
    const largeNeeded = yield* Fiber.join(largeFiber)
    needed = [...smallNeeded, ...largeNeeded]
    const total = needed.reduce((sum, c) => sum + c.size, 0)
    if (!pipelined && total >= COMPRESS_CHUNKS_FROM) takes = yield* serverTakes(remote)
    const rest = batchesOf([...held, ...largeNeeded])
    queue.push(...rest)
    progress = makeProgress("Uploading", total)
    progress.add(progressed)
    blobsKnown = true
    // No batch at all: the blob list goes to the caller at once.
    if (rest.length === 0 && !pipelined) answered = true
    handOver()
    planned = true
    yield* Deferred.succeed(allQueued, undefined)
  })
  yield* Effect.all([plan, ...Array.from({ length: IN_FLIGHT }, () => sender)], { concurrency: "unbounded", discard: true }).pipe(
    Effect.ensuring(Effect.sync(() => progress?.done()))
  )
  const total = needed.reduce((sum, c) => sum + c.size, 0)
  // No chunks/uploaded confirmation: a batch answers 200 only once every chunk in it is verified and stored
  // (the confirmation is for uploads to presigned URLs, which this server does not hand out).
  return { blobs, uploadedChunks: needed.length, uploadedBytes: total, sentBytes } satisfies UploadResult
}) as (remote: RemoteRepo, outgoing: ReadonlyArray<OutgoingBlob>, onBlobs?: OnBlobs) => Effect.Effect<UploadResult, CliFailure>
