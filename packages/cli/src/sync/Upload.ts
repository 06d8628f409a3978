/**
 * Sending blobs before a push: ask which large blobs (10 MiB and more) the
 * server lacks (`blobs/check`) and cut those into FastCDC chunks, ask which
 * chunks it lacks (`chunks/check`; the organization dedups), and upload those
 * in binary batches (<= 256 entries, <= 16 MiB each, three in
 * flight). Chunk bytes are read from the files when a batch is sent, so memory
 * stays bounded by the batches in flight. When the server advertises
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
import type { ApiSync } from "@grove/api"
import { FastCdc, Objects } from "@grove/core"
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import { Effect } from "effect"
import { createReadStream } from "node:fs"
import * as fs from "node:fs/promises"
import { CliFailure } from "../Failures.ts"
import { mapLimit } from "../local/WorkingTree.ts"
import { bodyCompressionEnabled, capabilitiesOf } from "./BodyCompression.ts"
import type { ChunkSource, OutgoingBlob } from "./Outgoing.ts"
import {
  batchesOf,
  COMPRESS_CHUNKS_FROM,
  HASHED_FRAMES_TYPE,
  hashedBatch,
  isLarge,
  READ_SYNC_BELOW,
  readRangeSync,
  sendsUnasked,
  shorter,
  uniqueBlobs,
  wholeChunk
} from "./Outgoing.ts"
import { makeProgress } from "./Progress.ts"
import type { RemoteRepo } from "./RemoteRepo.ts"
import { bareFrames, transfer, uploadCompression } from "./RemoteRepo.ts"

export type { OutgoingBlob }

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

/** The chunk list of a file: itself under the threshold, else FastCDC chunks hashed one by one. */
export const chunkFile = async (blob: OutgoingBlob): Promise<Array<ApiSync.ChunkRefData>> => {
  if (!isLarge(blob)) return [{ hash: blob.hash, offset: 0, size: blob.size }]
  const chunker = new FastCdc.FastCdcChunker()
  const refs: Array<ApiSync.ChunkRefData> = []
  const take = (chunks: ReadonlyArray<FastCdc.Chunk>) => {
    for (const c of chunks) refs.push({ hash: Objects.Blake3.hash(c.data), offset: c.offset, size: c.length })
  }
  for await (const piece of createReadStream(blob.file, { highWaterMark: 1024 * 1024 })) take(chunker.push(piece as Buffer))
  take(chunker.finish())
  return refs
}

/** Exported for its test. */
export const readRange = async (source: ChunkSource): Promise<Uint8Array> => {
  if (source.size < READ_SYNC_BELOW) return readRangeSync(source)
  const handle = await fs.open(source.file, "r")
  try {
    const data = new Uint8Array(source.size)
    let read = 0
    while (read < source.size) {
      const { bytesRead } = await handle.read(data, read, source.size - read, source.offset + read)
      if (bytesRead === 0) throw shorter(source.file)
      read += bytesRead
    }
    return data
  } finally {
    await handle.close()
  }
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
 * The push's blob list, handed over while the chunks upload: it is final before the first batch goes (batches only
 * succeed or fail), so the caller builds the push body meanwhile (commands/Push.ts).
 */
export type OnBlobs = (blobs: ReadonlyArray<ApiSync.BlobData>) => void

export const uploadBlobs = Effect.fn("Upload.blobs")(function*(
  remote: RemoteRepo,
  outgoing: ReadonlyArray<OutgoingBlob>,
  onBlobs?: OnBlobs
) {
  const { call, client } = remote.connection
  const params = { owner: remote.owner, name: remote.name }
  const unique = uniqueBlobs(outgoing)
  // Large files are cut while blobs/check is on its way (most of them are missing when they are new), a few at a
  // time and up to EARLY_BYTES; once the check answers only missing ones are still cut, and a failed check stops them.
  let budget = EARLY_BYTES
  const earlyBlobs = unique.filter((b) => isLarge(b) && (budget -= b.size) >= 0)
  let wanted = (_hash: string) => true
  const early = new Map<string, Array<ApiSync.ChunkRefData> | Error>()
  const earlyDone = mapLimit(earlyBlobs, CUT_AT_ONCE, async (b) => {
    // A read error matters only if the server lacks the blob: kept, thrown below when it does.
    if (wanted(b.hash)) early.set(b.hash, await chunkFile(b).catch((e) => e instanceof Error ? e : new Error(String(e))))
  })
  const missing = new Set<string>()
  const small = unique.filter((b) => !isLarge(b))
  const large = unique.filter(isLarge)
  yield* Effect.forEach(pages(large.map((b) => b.hash), CHECK_PAGE), (page) =>
    Effect.map(call(client.sync.blobsCheck({ params, payload: { hashes: [...page] } })), (answer) => {
      for (const hash of answer.missing) missing.add(hash)
    }), { discard: true }).pipe(Effect.onError(() => Effect.sync(() => (wanted = () => false))))
  wanted = (hash) => missing.has(hash)
  const toSend = large.filter((b) => missing.has(b.hash))
  const blobs: Array<ApiSync.BlobData> = []
  const sources = new Map<string, ChunkSource>()
  for (const b of small) sources.set(b.hash, wholeChunk(b))
  const lists = yield* transfer("cannot read a file to chunk it", async () => {
    await earlyDone
    return mapLimit(toSend, CUT_AT_ONCE, async (blob) => {
      const chunks = early.get(blob.hash) ?? await chunkFile(blob)
      if (chunks instanceof Error) throw chunks
      return { blob, chunks }
    })
  })
  for (const { blob, chunks } of lists) {
    blobs.push({ hash: blob.hash, content: [], size: blob.size, chunks })
    for (const c of chunks) if (!sources.has(c.hash)) sources.set(c.hash, { hash: c.hash, file: blob.file, offset: c.offset, size: c.size })
  }
  const all = [...sources.values()]
  const unasked = sendsUnasked(large.length > 0, all)
  const needed: Array<ChunkSource> = unasked ? all : []
  for (const page of unasked ? [] : pages(all, CHECK_PAGE)) {
    const answer = yield* call(client.sync.chunksCheck({
      params,
      payload: { hashes: page.map((c) => c.hash), sizes: page.map((c) => c.size), chunk_batch_protocol: "bounded_v1" }
    }))
    for (const { hash } of answer.missing) {
      const source = sources.get(hash)
      if (source !== undefined) needed.push(source)
    }
  }
  const batches = batchesOf(needed)
  // Called at the first batch's answer, when the other batches in flight keep the server busy while the caller's
  // synchronous work runs (not as the batches are posted: it would hold their bodies back from the socket); at once
  // when there is no batch.
  let handedOver = false
  const handOver = () => {
    if (handedOver) return
    handedOver = true
    onBlobs?.(blobs)
  }
  if (batches.length === 0) handOver()
  const total = needed.reduce((sum, c) => sum + c.size, 0)
  const takes = total >= COMPRESS_CHUNKS_FROM ? yield* serverTakes(remote) : { compress: false, wholeBody: false, bare: false }
  const compress = takes.compress
  let { bare, wholeBody } = takes
  const encode = (data: Uint8Array): Uint8Array | Promise<Uint8Array> =>
    !compress ? data : data.length >= ASYNC_FROM ? Objects.ChunkCompression.encodeChunkAsync(data) : Objects.ChunkCompression.encodeChunk(data)
  const framed = (frames: ReadonlyArray<{ readonly hash: string; readonly data: Uint8Array }>, sent: ReadonlyArray<Uint8Array>, asBare: boolean) =>
    Buffer.concat(
      asBare
        ? Objects.Frames.encodeBareFrames(frames.map((f, i) => Objects.ChunkCompression.bareFrame(f.data, sent[i]!)))
        : [hashedBatch(frames.map((f, i) => ({ hash: f.hash, data: sent[i]! })))]
    )
  /**
   * A batch's body: its plain frames as one zstd stream where the server takes zstd bodies (one context a batch on
   * each side instead of one a chunk, and matches across chunks), else each chunk compressed on its own (or not).
   */
  const bodyOf = async (
    frames: ReadonlyArray<{ readonly hash: string; readonly data: Uint8Array }>,
    asBare: boolean,
    asWhole: boolean
  ): Promise<BatchBody> => {
    const plain = frames.map((f) => f.data)
    if (asWhole && Objects.ChunkCompression.batchWorthZstd(plain)) {
      const body = framed(frames, plain, asBare)
      const zstd = await Objects.ChunkCompression.encodeBatchBody(body)
      if (zstd === body) return { body }
      if (zstd !== undefined) return { body: zstd, contentEncoding: "zstd" }
    }
    return { body: framed(frames, await Promise.all(plain.map(encode)), asBare) }
  }
  const progress = makeProgress("Uploading", total)
  let sentBytes = 0
  yield* Effect.forEach(batches, (batch) =>
    transfer("upload failed", async () => {
      const frames = await Promise.all(batch.map(async (c) => ({ hash: c.hash, data: await readRange(c) })))
      const post = async (asBare: boolean, asWhole: boolean) => {
        const { body, contentEncoding } = await bodyOf(frames, asBare, asWhole)
        const contentType = asBare ? Objects.Frames.BARE_CONTENT_TYPE : HASHED_FRAMES_TYPE
        await remote.sendBinary("chunks/batch", {
          method: "POST",
          body,
          contentType,
          // A zstd body's plain bytes count against the server's decode budget, which other pushers may fill: its
          // 503 goes per chunk at once (below) rather than waiting for them.
          ...(contentEncoding === undefined ? {} : { contentEncoding, busyFailsAtOnce: true })
        })
        return body.length
      }
      const status = (error: unknown) => error instanceof CliFailure ? error.details?.["status"] : undefined
      const asBare = bare
      const asWhole = wholeBody
      sentBytes += await post(asBare, asWhole).catch((error: unknown) => {
        // Busy decoding others' zstd bodies: this batch per chunk (which the chunk handler decodes), later ones as before.
        if (asWhole && status(error) === 503) return post(asBare, false)
        // A node that knows neither bare frames nor zstd bodies (an older one behind the same address, mid-upgrade)
        // reads them as hashed frames and answers 400: invalid_batch, or invalid_chunk when the bytes happen to parse
        // as one frame with a garbage hash. This batch again, and every later one, as plain hashed frames.
        if (!(asBare || asWhole) || status(error) !== 400) throw error
        bare = false
        wholeBody = false
        return post(false, false)
      })
      progress.add(batch.reduce((sum, c) => sum + c.size, 0))
      handOver()
    }), { concurrency: IN_FLIGHT, discard: true }).pipe(Effect.ensuring(Effect.sync(progress.done)))
  // No chunks/uploaded confirmation: a batch answers 200 only once every chunk in it is verified and stored
  // (the confirmation is for uploads to presigned URLs, which this server does not hand out).
  return { blobs, uploadedChunks: needed.length, uploadedBytes: total, sentBytes } satisfies UploadResult
}) as (remote: RemoteRepo, outgoing: ReadonlyArray<OutgoingBlob>, onBlobs?: OnBlobs) => Effect.Effect<UploadResult, CliFailure>
