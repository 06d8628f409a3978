/**
 * zstd on the wire for chunk transfers (sync protocol, `chunk_compression`
 * capability). A chunk travels compressed only when that shrinks it; its hash
 * is always over the plain bytes, so a receiver tells the two apart the way the
 * protocol already reads stored chunks: bytes that start with the zstd magic and
 * decompress to the hash are compressed, anything else is raw. The frame format
 * does not change, and a client that never asks (the Oak client) gets raw bytes.
 */
import { constants, zstdCompress, zstdCompressSync, zstdDecompressSync } from "node:zlib"
import * as Blake3 from "./Blake3.ts"
import { type BareFrame, bareFramesIn, decodeBareFrames } from "./Frames.ts"

/** The capability key and value a server advertises, and a `chunks/fetch` request asks for. */
export const CAPABILITY = "chunk_compression"
export const ZSTD_V1 = "zstd_v1"
/** The `chunks/fetch` response header saying frames may be compressed (absent: all raw). */
export const RESPONSE_HEADER = "x-grove-chunk-compression"

/** zstd level 1: the fastest standard level; on source trees it shrinks about as much as level 3. */
const LEVEL = 1
const PARAMS = { params: { [constants.ZSTD_c_compressionLevel]: LEVEL } }
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

const worthTrying = (data: Uint8Array): boolean =>
  data.length >= MIN_SIZE &&
  (data.length < SAMPLE_FROM || zstdCompressSync(data.subarray(0, SAMPLE), PARAMS).length <= SAMPLE * KEEP_RATIO)

const pick = (data: Uint8Array, compressed: Buffer): Uint8Array =>
  compressed.length <= data.length * KEEP_RATIO ? view(compressed) : data

/** The bytes to send for a chunk: zstd when that shrinks it enough, else the chunk itself. */
export const encodeChunk = (data: Uint8Array): Uint8Array => worthTrying(data) ? pick(data, zstdCompressSync(data, PARAMS)) : data

/** `encodeChunk` on the thread pool (large chunks: several compress at once while the main thread goes on). */
export const encodeChunkAsync = (data: Uint8Array): Promise<Uint8Array> =>
  worthTrying(data)
    ? new Promise((resolve, reject) => zstdCompress(data, PARAMS, (error, out) => error === null ? resolve(pick(data, out)) : reject(error)))
    : Promise.resolve(data)

/**
 * The plain bytes of a received chunk: zstd-compressed bytes whose decompression hashes to `hash`,
 * else the bytes themselves if they do. Undefined when neither matches.
 */
export const plainChunkBytes = (hash: string, received: Uint8Array, maxPlainBytes: number): Uint8Array | undefined => {
  if (hasZstdMagic(received)) {
    try {
      const plain = zstdDecompressSync(received, { maxOutputLength: maxPlainBytes })
      if (Blake3.hash(plain) === hash) return view(plain)
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
  frame.zstd ? view(zstdDecompressSync(frame.data, { maxOutputLength: maxPlainBytes })) : frame.data

/** A received bare frame as a chunk: its plain bytes and the hash taken from them. */
const named = (frame: BareFrame, maxPlainBytes: number): { readonly hash: string; readonly data: Uint8Array } => {
  const data = bareFramePlain(frame, maxPlainBytes)
  return { hash: Blake3.hash(data), data }
}

/**
 * Bare frames from a byte stream as chunks: each one's plain bytes (at most `maxPlainBytes`) and the hash
 * taken from them (no hash travels; the receiver verifies by naming). Both ends read uploads and fetches so.
 */
export async function* hashedBareFrames(
  body: AsyncIterable<Uint8Array>,
  maxPlainBytes: number
): AsyncGenerator<{ readonly hash: string; readonly data: Uint8Array }> {
  for await (const frame of decodeBareFrames(body)) yield named(frame, maxPlainBytes)
}

/** `hashedBareFrames` of a body read whole, synchronously; raw chunks are views into `body`. */
export function* hashedBareFramesIn(
  body: Uint8Array,
  maxPlainBytes: number
): Generator<{ readonly hash: string; readonly data: Uint8Array }> {
  for (const frame of bareFramesIn(body)) yield named(frame, maxPlainBytes)
}
