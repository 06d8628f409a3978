/**
 * A zstd request body inflated once its compressed parts are all written (ContentEncoding's decoder): into one buffer
 * of the size its frame declares, stopping at the route's limit, at `MAX_RATIO` or when the decode budget runs out, and
 * refusing bytes after the body's frame (node's decoder would drop them).
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
 * A zstd body of `compressedSize` bytes, its parts kept as they come off the socket (no copy of the whole compressed
 * body is gathered) and inflated once all are in (`end`): a stalled body holds no budget. Stops at `limit` plain
 * bytes, at `MAX_RATIO` times `compressedSize`, or when `share` runs out; `result` answers the plain bytes after `end`.
 */
export class Inflation {
  private inflate: ReturnType<typeof createZstdDecompress> | undefined
  /** The body's parts as they came (no copy), until all of it is in. */
  private readonly pending: Array<Uint8Array> = []
  private pendingBytes = 0
  /** The compressed bytes handed to zstd, to tell at the end whether it used them all, and the last write. */
  private written = 0
  private lastWrite: Uint8Array | undefined
  private readonly parts: Array<Buffer> = []
  private size = 0
  private prepaid = 0
  private outcome: Effect.Effect<Buffer, Refusal | Error> | undefined
  private resume: ((effect: Effect.Effect<Buffer, Refusal | Error>) => void) | undefined
  private readonly compressedSize: number
  private readonly limit: number
  private readonly share: Share

  constructor(compressedSize: number, limit: number, share: Share) {
    this.compressedSize = compressedSize
    this.limit = limit
    this.share = share
  }

  /** Keeps `part` (as it is: no copy) until `end`. */
  write(part: Uint8Array): void {
    if (this.outcome !== undefined || this.inflate !== undefined || part.length === 0) return
    this.pending.push(part)
    this.pendingBytes += part.length
  }

  end(): void {
    if (this.outcome !== undefined) return
    this.run()
    this.inflate?.end()
  }

  /** The plain bytes, or why not; interrupting it stops the decoder. */
  readonly result = Effect.callback<Buffer, Refusal | Error>((resume) => {
    if (this.outcome !== undefined) return resume(this.outcome)
    this.resume = resume
    return Effect.sync(() => this.stop())
  })

  /** Stops decoding (the request failed or ended). */
  stop(): void {
    this.parts.length = 0
    this.inflate?.destroy()
    this.finish(Effect.fail(new Error("the body's decoding was stopped")))
  }

  private finish(outcome: Effect.Effect<Buffer, Refusal | Error>) {
    if (this.outcome !== undefined) return
    this.outcome = outcome
    this.lastWrite = undefined
    this.resume?.(outcome)
  }

  private refuse(why: Refusal) {
    this.parts.length = 0
    this.inflate?.destroy()
    this.finish(Effect.fail(why))
  }

  /**
   * Whether zstd left bytes unused: node's decoder ends at a frame's end and drops the rest of that write (a second
   * frame, junk) without a word, so a body would be taken as its first frame only (a batch's later chunks lost).
   * Grove's senders write one frame (and an empty one): that one is let through, anything else refused.
   */
  private trailing(): boolean {
    const unused = this.written - (this.inflate?.bytesWritten ?? 0)
    if (unused <= 0) return false
    const last = this.lastWrite
    return last === undefined || unused > last.length || !emptyFrames(last.subarray(last.length - unused))
  }

  /**
   * Decodes the body once all of it is in: a body that has not arrived (a sender stalling after a frame header)
   * holds no budget and no output buffer. Its parts go to zstd in `WRITE_FROM` writes (each a trip to the thread
   * pool), the last `EMPTY_FRAME_MAX` bytes in the last one, so that a frame's end and what follows it share a write.
   */
  private run() {
    if (this.inflate !== undefined) return
    const inflate = this.start()
    let group: Array<Uint8Array> = []
    let groupBytes = 0
    let left = this.pendingBytes
    for (const part of this.pending) {
      group.push(part)
      groupBytes += part.length
      left -= part.length
      if (left === 0 || (groupBytes >= WRITE_FROM && left >= EMPTY_FRAME_MAX)) {
        if (inflate === undefined || this.outcome !== undefined) break
        this.lastWrite = group.length === 1 ? group[0]! : Buffer.concat(group, groupBytes)
        inflate.write(this.lastWrite)
        this.written += groupBytes
        group = []
        groupBytes = 0
      }
    }
    this.pending.length = 0
    this.pendingBytes = 0
  }

  /** The decoder, or none when the budget refused the declared size. */
  private start(): ReturnType<typeof createZstdDecompress> | undefined {
    const head = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, Math.min(this.pendingBytes, FRAME_HEADER_MAX))
    const declared = declaredSize(head, this.compressedSize, this.limit)
    // A declared size is taken from the budget before its buffer is made; bytes past it as they come.
    if (declared !== undefined && !this.share.take(declared)) {
      this.refuse("busy")
      return undefined
    }
    this.prepaid = declared ?? 0
    const chunkSize = declared === undefined ? 64 * 1024 : Math.max(64, declared + 1)
    const inflate = createZstdDecompress({ chunkSize, params: { [constants.ZSTD_d_windowLogMax]: WINDOW_LOG_MAX } })
    this.inflate = inflate
    inflate.on("data", (part: Buffer) => {
      if (this.outcome !== undefined) return
      this.size += part.length
      if (this.size > this.limit) return this.refuse("too_large")
      if (!BodyCompression.withinRatio(this.size, this.compressedSize)) return this.refuse("ratio")
      const owed = part.length - this.prepaid
      this.prepaid = Math.max(0, -owed)
      if (owed > 0 && !this.share.take(owed)) return this.refuse("busy")
      this.parts.push(part)
    })
    inflate.on("error", (error) => this.finish(Effect.fail(error)))
    inflate.on("end", () => this.trailing() ? this.refuse("trailing") : this.finish(Effect.succeed(joined(this.parts, this.size))))
    return inflate
  }
}
