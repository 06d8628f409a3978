/**
 * zstd on the wire for chunk transfers (sync protocol, `chunk_compression`
 * capability). A chunk travels compressed only when that shrinks it; its hash
 * is always over the plain bytes, so a receiver tells the two apart the way the
 * protocol already reads stored chunks: bytes that start with the zstd magic and
 * decompress to the hash are compressed, anything else is raw. The frame format
 * does not change, and a client that never asks (the Oak client) gets raw bytes.
 */
import * as Blake3 from "./Blake3.ts"
import { withinRatio } from "./BodyCompression.ts"
import { CHUNK_MAX_SIZE } from "./Chunks.ts"
import type { BareFrame } from "./Frames.ts"
import { zlib } from "./Zlib.ts"

/** The capability key and value a server advertises, and a `chunks/fetch` request asks for. */
export const CAPABILITY = "chunk_compression"
export const ZSTD_V1 = "zstd_v1"
/** The `chunks/fetch` response header saying frames may be compressed (absent: all raw). */
export const RESPONSE_HEADER = "x-grove-chunk-compression"

/** zstd level 1: the fastest standard level; on source trees it shrinks about as much as level 3. */
const LEVEL = 1
let levelParams: { readonly params: Record<number, number> } | undefined
/** The options at `LEVEL` (made on first use: node:zlib's constants are read once it is loaded, see Zlib.ts). */
const params = () => levelParams ??= { params: { [zlib().constants.ZSTD_c_compressionLevel]: LEVEL } }
/** Under this, a frame header costs more than compression saves. */
const MIN_SIZE = 64
/** Compressed must be at most this share of the plain size, else the plain bytes go (incompressible). */
const KEEP_RATIO = 0.95
/** Large chunks are tried on a sample first: media and archives do not shrink, and trying costs CPU. */
const SAMPLE_FROM = 256 * 1024
const SAMPLE = 64 * 1024

const ZSTD_MAGIC = [0x28, 0xb5, 0x2f, 0xfd] as const

export const hasZstdMagic = (bytes: Uint8Array): boolean => ZSTD_MAGIC.every((b, i) => bytes[i] === b)

const view = (buffer: Buffer): Uint8Array => new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)

/**
 * node:zlib writes its output into buffers of `chunkSize` (16 KiB unless told; small ones are slices of
 * Buffer's shared 64 KiB pool) and slices the result out of them: a small chunk's bytes keep 16 KiB alive
 * (a chunk held until its group is stored outlives young collections, and so the pool does), and a larger
 * output is gathered from pieces and copied once more. Where the output's size is known up front: one
 * buffer of that size (one more byte: node:zlib asks for a further buffer when the output fills one
 * exactly), and zstd codes the frame in one pass, without its streaming buffers. A context per chunk stays:
 * node:zlib reuses one only in its async stream (a thread-pool trip per chunk).
 */
const MIN_CHUNK = 64
const DEFAULT_CHUNK = 16 * 1024
const sizedTo = (bytes: number) => Math.max(MIN_CHUNK, bytes + 1)

/** ZSTD_compressBound: the most a frame of `n` bytes can take (the size zstd compresses in one pass into). */
const compressBound = (n: number) => n + (n >>> 8) + (n < 128 * 1024 ? (128 * 1024 - n) >>> 11 : 0)

/** Compression options for `data`: a small chunk's output in a buffer of its own bound (a larger one's in node:zlib's pieces). */
const paramsFor = (data: Uint8Array) =>
  data.length < DEFAULT_CHUNK ? { ...params(), chunkSize: sizedTo(compressBound(data.length)) } : params()

/** Whether a large chunk's sample says it will not shrink (media, archives); small ones are never sampled. */
const sampledIncompressible = (data: Uint8Array): boolean =>
  data.length >= SAMPLE_FROM && zlib().zstdCompressSync(data.subarray(0, SAMPLE), params()).length > SAMPLE * KEEP_RATIO

const worthTrying = (data: Uint8Array): boolean => data.length >= MIN_SIZE && !sampledIncompressible(data)

const pick = (data: Uint8Array, compressed: Buffer): Uint8Array =>
  compressed.length <= data.length * KEEP_RATIO ? view(compressed) : data

/** The bytes to send for a chunk: zstd when that shrinks it enough, else the chunk itself. */
export const encodeChunk = (data: Uint8Array): Uint8Array => worthTrying(data) ? pick(data, zlib().zstdCompressSync(data, paramsFor(data))) : data

/** `encodeChunk` on the thread pool (large chunks: several compress at once while the main thread goes on). */
export const encodeChunkAsync = (data: Uint8Array): Promise<Uint8Array> =>
  worthTrying(data)
    ? new Promise((resolve, reject) => zlib().zstdCompress(data, paramsFor(data), (error, out) => error === null ? resolve(pick(data, out)) : reject(error)))
    : Promise.resolve(data)

/**
 * Whether a batch is worth one zstd stream over its whole body (`encodeBatchBody`): not when most of its bytes are
 * large chunks whose sample does not shrink (a large file's chunks: compressing 16 MiB of them costs ~25 ms each side
 * for nothing; `encodeChunk` sends them as they are after the sample).
 */
export const batchWorthZstd = (chunks: ReadonlyArray<Uint8Array>): boolean => {
  let total = 0
  let incompressible = 0
  for (const data of chunks) {
    total += data.length
    if (sampledIncompressible(data)) incompressible += data.length
  }
  return incompressible * 2 <= total
}

/**
 * Level 2 for a whole batch: smaller than level 1 per chunk (26.6 vs 26.9 MB of the bench's 5,000 files: one block's
 * Huffman table spans several chunks, so level 1 lost to per-chunk frames) for about the same CPU.
 */
const BATCH_LEVEL = 2

/**
 * A chunk batch's body (plain frames) as one zstd frame, for `Content-Encoding: zstd` to a server that takes zstd
 * bodies (`body_compression: zstd_v1`, which covers chunks/batch): one compression context a batch, not one a chunk
 * (node:zlib makes a new one per call, ~25 µs, on both sides: 5,000 of them in a 5,000-file push), on the thread
 * pool. Answers the body itself when zstd does not shrink it (nothing grows), and undefined when it shrinks past what
 * such a server takes (`BodyCompression.withinRatio`): then the chunks go compressed one by one (`encodeChunk`).
 */
export const encodeBatchBody = (body: Uint8Array): Promise<Uint8Array | undefined> =>
  new Promise((resolve, reject) =>
    zlib().zstdCompress(body, {
      params: { [zlib().constants.ZSTD_c_compressionLevel]: BATCH_LEVEL },
      pledgedSrcSize: body.length,
      chunkSize: sizedTo(compressBound(body.length))
    }, (error, out) => {
      if (error !== null) return reject(error)
      resolve(out.length > body.length * KEEP_RATIO ? body : withinRatio(body.length, out.length) ? view(out) : undefined)
    })
  )

/**
 * The plain size a zstd frame's header declares (RFC 8878 3.1.1.1), undefined when it does not say or the
 * bytes are no frame header. `encodeChunk`'s frames (a whole chunk in one call) always say.
 */
export const frameContentSize = (frame: Uint8Array): number | undefined => {
  if (frame.length < 6 || !hasZstdMagic(frame)) return undefined
  const descriptor = frame[4]!
  const singleSegment = (descriptor & 0x20) !== 0
  const sizeFlag = descriptor >> 6
  const fieldBytes = sizeFlag === 0 ? (singleSegment ? 1 : 0) : 1 << sizeFlag
  if (fieldBytes === 0) return undefined
  const at = 5 + (singleSegment ? 0 : 1) + [0, 1, 2, 4][descriptor & 3]!
  if (frame.length < at + fieldBytes) return undefined
  let size = 0
  for (let i = fieldBytes - 1; i >= 0; i--) size = size * 256 + frame[at + i]!
  return fieldBytes === 2 ? size + 256 : size
}

/**
 * A zstd frame's plain bytes, at most `maxPlainBytes` (throws past that, or on bytes that are not zstd). The output
 * is sized to the declared size only up to a chunk's largest: a 17-byte frame declaring 64 MiB would otherwise make
 * the server allocate 64 MiB before zstd finds it short.
 */
const decompress = (frame: Uint8Array, maxPlainBytes: number): Uint8Array => {
  const size = frameContentSize(frame)
  const sized = size !== undefined && size <= Math.min(maxPlainBytes, CHUNK_MAX_SIZE) ? { chunkSize: sizedTo(size) } : {}
  return view(zlib().zstdDecompressSync(frame, { maxOutputLength: maxPlainBytes, ...sized }))
}

/**
 * The plain bytes of a received chunk: zstd-compressed bytes whose decompression hashes to `hash`,
 * else the bytes themselves if they do. Undefined when neither matches.
 */
export const plainChunkBytes = (hash: string, received: Uint8Array, maxPlainBytes: number): Uint8Array | undefined => {
  if (hasZstdMagic(received)) {
    try {
      const plain = decompress(received, maxPlainBytes)
      if (Blake3.hash(plain) === hash) return plain
    } catch {
      // Not valid zstd (or too large): the bytes may still be a raw chunk that happens to start with the magic.
    }
  }
  return Blake3.hash(received) === hash ? received : undefined
}

/** A chunk as a bare frame (`Frames.encodeBareFrames`): `encodeChunk`'s bytes, and whether they are zstd. */
export const bareFrame = (data: Uint8Array, sent: Uint8Array): BareFrame => ({ data: sent, zstd: sent !== data })

/**
 * The plain bytes of a received bare frame: decompressed (at most `maxPlainBytes`) when it says zstd.
 * Throws on bytes that are not zstd or decompress past the bound; the caller hashes the result.
 */
export const bareFramePlain = (frame: BareFrame, maxPlainBytes: number): Uint8Array =>
  frame.zstd ? decompress(frame.data, maxPlainBytes) : frame.data

/** A received bare frame as a chunk: its plain bytes and the hash taken from them. */
export const namedBareFrame = (frame: BareFrame, maxPlainBytes: number): { readonly hash: string; readonly data: Uint8Array } => {
  const data = bareFramePlain(frame, maxPlainBytes)
  return { hash: Blake3.hash(data), data }
}
