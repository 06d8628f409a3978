/**
 * A zstd request body inflated once its compressed parts are all in (ContentEncoding's decoder): `inflate`.
 */
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import { frameContentSize } from "@grove/core/objects/ChunkCompression"
import { Effect } from "effect"
import { constants, createZstdDecompress } from "node:zlib"

/** RFC 9659: a zstd content coding's window is at most 8 MiB (what grove compresses with). */
const WINDOW_LOG_MAX = 23

/** A request's share of the decode budget (ContentEncoding's `DecodeShare`). */
export interface Share {
  take(bytes: number): boolean
}

/** `trailing`: bytes after the body's frame (but empty frames), which node's decoder would drop unread. */
export type Refusal = "too_large" | "ratio" | "busy" | "trailing"

/** The most bytes a zstd frame's header takes (RFC 8878 3.1.1: magic 4, descriptor 1, window 1, dictionary 4, size 8). */
const FRAME_HEADER_MAX = 18
/**
 * Socket parts (~64 KiB) are handed to zstd this many bytes at a time: each write is a trip to the thread pool, and
 * a 1.4 MB body in 64 KiB writes cost ~1.8 ms more CPU than in one, in 512 KiB ones ~0.4 (this machine).
 */
const WRITE_FROM = 512 * 1024
/** An empty zstd frame's most bytes (magic 4, header 2-14, an empty last block 3, checksum 4): a body's last ones go in its last write. */
const EMPTY_FRAME_MAX = 25

/**
 * Whether `bytes` are zstd frames that hold nothing: node's one-shot compressor (`zstdCompress`, what grove's senders
 * use) ends a body whose size it was told with one (`28 b5 2f fd 20 00 01 00 00`).
 */
const emptyFrames = (bytes: Uint8Array): boolean => {
  let at = 0
  while (at < bytes.length) {
    const descriptor = bytes[at + 4]
    if (descriptor === undefined || bytes[at] !== 0x28 || bytes[at + 1] !== 0xb5 || bytes[at + 2] !== 0x2f || bytes[at + 3] !== 0xfd) return false
    const single = (descriptor >> 5) & 1
    const sizeBytes = [single, 2, 4, 8][descriptor >> 6]!
    // Reserved bit set, or a 2-byte content size (it counts from 256: never empty).
    if ((descriptor & 0x08) !== 0 || sizeBytes === 2) return false
    let p = at + 5 + (single === 1 ? 0 : 1) + [0, 1, 2, 4][descriptor & 3]!
    for (const end = p + sizeBytes; p < end; p++) if (bytes[p] !== 0) return false
    // One last raw block of no bytes, then the checksum if the frame has one.
    if (bytes[p] !== 1 || bytes[p + 1] !== 0 || bytes[p + 2] !== 0) return false
    at = p + 3 + ((descriptor >> 2) & 1) * 4
  }
  return at === bytes.length
}

/**
 * The plain size to decode into one buffer: what the body's (first) frame declares, when that is within the limit and
 * the ratio (grove's chunk batches declare it). One allocation of the size, not 64 KiB pieces gathered and copied
 * into another: a 5,000-file push's 16 MiB batches so left glibc's arenas ~20 MiB larger after it.
 */
const declaredSize = (head: Uint8Array, compressedSize: number, limit: number): number | undefined => {
  const declared = frameContentSize(head)
  return declared !== undefined && declared <= limit && BodyCompression.withinRatio(declared, compressedSize) ? declared : undefined
}

/** `parts` as one buffer: a view when they lie back to back in one (zstd wrote them so), else a copy. */
const joined = (parts: ReadonlyArray<Buffer>, size: number): Buffer => {
  const first = parts[0]
  if (first === undefined) return Buffer.alloc(0)
  let end = first.byteOffset
  for (const part of parts) {
    if (part.buffer !== first.buffer || part.byteOffset !== end) return Buffer.concat(parts, size)
    end += part.length
  }
  return Buffer.from(first.buffer, first.byteOffset, size)
}

/**
 * Inflates a zstd body of `compressedSize` bytes once all of it is in, from its parts as they came off the socket (no
 * copy of the whole compressed body gathered): a body that has not arrived (a sender stalling after a frame header)
 * holds no budget and no output buffer. Into one buffer of the size its frame declares; stops at `limit` plain bytes,
 * at `MAX_RATIO` times `compressedSize`, or when `share` runs out; refuses bytes after the body's frame (but empty
 * frames), which node's decoder would drop unread (a batch's later chunks lost). Interrupting it stops the decoder.
 */
export const inflate = (parts: ReadonlyArray<Uint8Array>, compressedSize: number, limit: number, share: Share) =>
  Effect.callback<Buffer, Refusal | Error>((resume) => {
    const total = parts.reduce((sum, part) => sum + part.length, 0)
    const head = parts.length === 1 ? parts[0]! : Buffer.concat(parts, Math.min(total, FRAME_HEADER_MAX))
    const declared = declaredSize(head, compressedSize, limit)
    // A declared size is taken from the budget before its buffer is made; bytes past it as they come.
    if (declared !== undefined && !share.take(declared)) return void resume(Effect.fail("busy"))
    let prepaid = declared ?? 0
    const chunkSize = declared === undefined ? 64 * 1024 : Math.max(64, declared + 1)
    const decoder = createZstdDecompress({ chunkSize, params: { [constants.ZSTD_d_windowLogMax]: WINDOW_LOG_MAX } })
    const out: Array<Buffer> = []
    let size = 0
    let done = false
    /** The compressed bytes handed to zstd, to tell at the end whether it used them all, and the last write. */
    let written = 0
    let lastWrite: Uint8Array | undefined
    const finish = (outcome: Effect.Effect<Buffer, Refusal | Error>) => {
      if (done) return
      done = true
      resume(outcome)
    }
    const refuse = (why: Refusal) => {
      out.length = 0
      decoder.destroy()
      finish(Effect.fail(why))
    }
    // zstd ends at a frame's end and drops the rest of that write without a word. Grove's senders write one frame
    // (and an empty one): that one is let through, anything else refused.
    const trailing = () => {
      const unused = written - decoder.bytesWritten
      return unused > 0 && (lastWrite === undefined || unused > lastWrite.length || !emptyFrames(lastWrite.subarray(lastWrite.length - unused)))
    }
    decoder.on("data", (part: Buffer) => {
      if (done) return
      size += part.length
      if (size > limit) return refuse("too_large")
      if (!BodyCompression.withinRatio(size, compressedSize)) return refuse("ratio")
      const owed = part.length - prepaid
      prepaid = Math.max(0, -owed)
      if (owed > 0 && !share.take(owed)) return refuse("busy")
      out.push(part)
    })
    decoder.on("error", (error) => finish(Effect.fail(error)))
    decoder.on("end", () => trailing() ? refuse("trailing") : finish(Effect.succeed(joined(out, size))))
    // `WRITE_FROM` bytes a write (each a trip to the thread pool), the last `EMPTY_FRAME_MAX` bytes in the last one, so
    // that a frame's end and what follows it share a write.
    let group: Array<Uint8Array> = []
    let groupBytes = 0
    let left = total
    for (const part of parts) {
      if (part.length === 0) continue
      group.push(part)
      groupBytes += part.length
      left -= part.length
      if (left === 0 || (groupBytes >= WRITE_FROM && left >= EMPTY_FRAME_MAX)) {
        if (done) break
        lastWrite = group.length === 1 ? group[0]! : Buffer.concat(group, groupBytes)
        decoder.write(lastWrite)
        written += groupBytes
        group = []
        groupBytes = 0
      }
    }
    decoder.end()
    return Effect.sync(() => {
      done = true
      decoder.destroy()
    })
  })
