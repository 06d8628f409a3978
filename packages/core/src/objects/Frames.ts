/**
 * The binary frame formats of `chunks/batch` (upload) and `chunks/fetch` (download).
 *
 * - Hashed frames (the sync protocol, what the Oak client speaks): repeated
 *   `u32 BE hash length, hash (UTF-8 hex), u32 BE data length, data`.
 * - Bare frames (`chunk_frames: "bare_v1"`, a Grove extension a server advertises in `capabilities`):
 *   repeated `u32 BE word, data`, where bit 31 of the word says the data is zstd (`ChunkCompression`)
 *   and the low 31 bits are the data's length. No hash travels: the receiver hashes every chunk
 *   anyway to verify it, so it takes the hash from the bytes (68 fewer bytes a chunk; 0.3 MiB of a
 *   5,000-file push). A sender uses them only with a receiver that said it takes them: an upload
 *   (to a server advertising them) says so by its content type `BARE_CONTENT_TYPE`, a download asks
 *   with `frames: "bare_v1"` and the answer's `x-grove-chunk-frames` header says which format came.
 */

export interface Frame {
  readonly hash: string
  readonly data: Uint8Array
}

/** A bare frame: the bytes as sent, and whether they are zstd (else the chunk itself). */
export interface BareFrame {
  readonly data: Uint8Array
  readonly zstd: boolean
}

/** The capability key and value, the fetch request's field value, and the header naming the format of a body. */
export const CAPABILITY = "chunk_frames"
export const BARE_V1 = "bare_v1"
export const HEADER = "x-grove-chunk-frames"
export const BARE_CONTENT_TYPE = "application/vnd.grove.chunk-frames.bare-v1"

const encoder = new TextEncoder()
const decoder = new TextDecoder()
const ZSTD_BIT = 0x8000_0000

/** The header's length of a frame (hashed: `u32 hash length, hash, u32 data length`; bare: `u32 data length`). */
export const frameHeaderLength = (hash: string | undefined): number => hash === undefined ? 4 : 8 + encoder.encode(hash).length

/**
 * Writes a frame's header into `into` at `at` (hashed when `hash` is given, else bare, its data zstd'd when `zstd`) and
 * answers where the data goes: the one place the layout is written, for the pieces below and for a caller that reads
 * the data straight into its body after it (the client's upload batches).
 */
export const writeFrameHeader = (into: Uint8Array, at: number, hash: string | undefined, size: number, zstd = false): number => {
  const view = new DataView(into.buffer, into.byteOffset, into.byteLength)
  if (hash === undefined) {
    view.setUint32(at, (zstd ? ZSTD_BIT : 0) + size)
    return at + 4
  }
  const bytes = encoder.encode(hash)
  view.setUint32(at, bytes.length)
  into.set(bytes, at + 4)
  view.setUint32(at + 4 + bytes.length, size)
  return at + 8 + bytes.length
}

/** The frames of one request body, as pieces to concatenate (no copy of the data). */
export const encodeFrames = (frames: ReadonlyArray<Frame>): Array<Uint8Array> => {
  const pieces: Array<Uint8Array> = []
  for (const frame of frames) {
    const header = new Uint8Array(frameHeaderLength(frame.hash))
    writeFrameHeader(header, 0, frame.hash, frame.data.length)
    pieces.push(header, frame.data)
  }
  return pieces
}

/** Bare frames as pieces to concatenate (no copy of the data). */
export const encodeBareFrames = (frames: ReadonlyArray<BareFrame>): Array<Uint8Array> => {
  const pieces: Array<Uint8Array> = []
  for (const frame of frames) {
    const header = new Uint8Array(4)
    writeFrameHeader(header, 0, undefined, frame.data.length, frame.zstd)
    pieces.push(header, frame.data)
  }
  return pieces
}

/** Longest hash field accepted (a BLAKE3 hex hash is 64). */
const MAX_HASH_LENGTH = 128
/** Largest data field accepted: a blob under the chunking threshold travels as one chunk. */
export const MAX_FRAME_DATA = 64 * 1024 * 1024

/** Exact-length reads from a byte stream; holds at most one network read beyond what was asked. */
const byteReader = (body: AsyncIterable<Uint8Array>) => {
  let buffer: Uint8Array = new Uint8Array(0)
  let start = 0
  const available = () => buffer.length - start
  const iterator = body[Symbol.asyncIterator]()
  const append = (piece: Uint8Array) => {
    const rest = buffer.subarray(start)
    const next = new Uint8Array(rest.length + piece.length)
    next.set(rest, 0)
    next.set(piece, rest.length)
    buffer = next
    start = 0
  }
  return {
    /** False at the end of the stream; true at the end only if nothing is buffered. */
    atEnd: async (): Promise<boolean> => {
      while (available() === 0) {
        const next = await iterator.next()
        if (next.done === true) return true
        buffer = next.value
        start = 0
      }
      return false
    },
    /** `n` bytes (a small header), or undefined when the stream ends first. */
    header: async (n: number): Promise<Uint8Array | undefined> => {
      while (available() < n) {
        const next = await iterator.next()
        if (next.done === true) return undefined
        append(next.value)
      }
      start += n
      return buffer.subarray(start - n, start)
    },
    /** `n` bytes in a buffer of their own (read straight into it rather than growing the shared one). */
    data: async (n: number): Promise<Uint8Array | undefined> => {
      const data = new Uint8Array(n)
      const have = Math.min(available(), n)
      data.set(buffer.subarray(start, start + have), 0)
      start += have
      let filled = have
      while (filled < n) {
        const next = await iterator.next()
        if (next.done === true) return undefined
        const piece = next.value
        const take = Math.min(piece.length, n - filled)
        data.set(piece.subarray(0, take), filled)
        filled += take
        if (take < piece.length) {
          buffer = piece.subarray(take)
          start = 0
        }
      }
      if (start >= buffer.length) {
        buffer = new Uint8Array(0)
        start = 0
      }
      return data
    }
  }
}

const TRUNCATED_HEADER = "truncated chunk stream (in a frame header)"

const u32 = (bytes: Uint8Array, at = 0) => new DataView(bytes.buffer, bytes.byteOffset + at, 4).getUint32(0)

/**
 * Frames from a byte stream, as they complete. Holds at most one frame's data
 * plus one network read in memory.
 */
export async function* decodeFrames(body: AsyncIterable<Uint8Array>): AsyncGenerator<Frame> {
  const reader = byteReader(body)
  while (!(await reader.atEnd())) {
    const length = await reader.header(4)
    if (length === undefined) throw new Error(TRUNCATED_HEADER)
    const hashLength = u32(length)
    if (hashLength === 0 || hashLength > MAX_HASH_LENGTH) throw new Error(`bad frame: hash length ${hashLength}`)
    const rest = await reader.header(hashLength + 4)
    if (rest === undefined) throw new Error(TRUNCATED_HEADER)
    const hash = decoder.decode(rest.subarray(0, hashLength))
    const dataLength = u32(rest, hashLength)
    if (dataLength > MAX_FRAME_DATA) throw new Error(`bad frame: ${dataLength} bytes for one chunk`)
    const data = await reader.data(dataLength)
    if (data === undefined) throw new Error(`truncated chunk stream (in the data of ${hash})`)
    yield { hash, data }
  }
}

const TRUNCATED_DATA = "truncated chunk stream (in a frame's data)"

/** A bare frame's header word: bit 31 says zstd, the rest is the data's length (bounded). */
const bareHeader = (word: number): { readonly dataLength: number; readonly zstd: boolean } => {
  const dataLength = word & ~ZSTD_BIT
  if (dataLength > MAX_FRAME_DATA) throw new Error(`bad frame: ${dataLength} bytes for one chunk`)
  return { dataLength, zstd: (word & ZSTD_BIT) !== 0 }
}

/**
 * Bare frames of a body read whole, as views into it (no copy, no promise per frame), synchronously: the reference
 * the streaming `bareFrameSplitter` is held to in its tests.
 */
export function* bareFramesIn(body: Uint8Array): Generator<BareFrame> {
  let at = 0
  while (at < body.length) {
    if (body.length - at < 4) throw new Error(TRUNCATED_HEADER)
    const { dataLength, zstd } = bareHeader(u32(body, at))
    at += 4
    if (body.length - at < dataLength) throw new Error(TRUNCATED_DATA)
    yield { data: body.subarray(at, at + dataLength), zstd }
    at += dataLength
  }
}

/** Bare frames from a byte stream, as they complete (memory as `decodeFrames`). */
export async function* decodeBareFrames(body: AsyncIterable<Uint8Array>): AsyncGenerator<BareFrame> {
  const reader = byteReader(body)
  while (!(await reader.atEnd())) {
    const header = await reader.header(4)
    if (header === undefined) throw new Error(TRUNCATED_HEADER)
    const { dataLength, zstd } = bareHeader(u32(header))
    const data = await reader.data(dataLength)
    if (data === undefined) throw new Error(TRUNCATED_DATA)
    yield { data, zstd }
  }
}

/** What a frame format's header says: how long its data is, and the frame that data makes. */
interface FrameHead<F> {
  readonly dataLength: number
  readonly frame: (data: Uint8Array) => F
}

/** A frame format for `splitFrames`: a header's whole length from its first four bytes, and what the whole header says. */
interface HeaderFormat<F> {
  readonly length: (bytes: Uint8Array, at: number) => number
  readonly read: (bytes: Uint8Array, at: number) => FrameHead<F>
}

const BARE_FORMAT: HeaderFormat<BareFrame> = {
  length: () => 4,
  read: (bytes, at) => {
    const { dataLength, zstd } = bareHeader(u32(bytes, at))
    return { dataLength, frame: (data) => ({ data, zstd }) }
  }
}

const HASHED_FORMAT: HeaderFormat<Frame> = {
  length: (bytes, at) => {
    const hashLength = u32(bytes, at)
    if (hashLength === 0 || hashLength > MAX_HASH_LENGTH) throw new Error(`bad frame: hash length ${hashLength}`)
    return 8 + hashLength
  },
  read: (bytes, at) => {
    const hashLength = u32(bytes, at)
    const hash = decoder.decode(bytes.subarray(at + 4, at + 4 + hashLength))
    const dataLength = u32(bytes, at + 4 + hashLength)
    if (dataLength > MAX_FRAME_DATA) throw new Error(`bad frame: ${dataLength} bytes for one chunk`)
    return { dataLength, frame: (data) => ({ hash, data }) }
  }
}

/**
 * Frames of `format` from a byte stream fed part by part (`push`), handed to `onFrame` synchronously as each
 * completes: no promise per frame or part. A frame that lies within one part is a view of it; one across parts is
 * copied once, into a buffer of its own size. `end` throws when the stream stopped inside a frame.
 */
const splitFrames = <F>(format: HeaderFormat<F>, onFrame: (frame: F) => void) => {
  // A header that crosses parts is gathered here (a hashed one is at most 8 + MAX_HASH_LENGTH bytes).
  const head = new Uint8Array(8 + MAX_HASH_LENGTH)
  let headHave = 0
  let headLength = 4
  let pending: { readonly data: Uint8Array; readonly frame: (data: Uint8Array) => F } | undefined
  let pendingHave = 0
  return {
    push: (part: Uint8Array): void => {
      let at = 0
      while (at < part.length) {
        if (pending !== undefined) {
          const take = Math.min(part.length - at, pending.data.length - pendingHave)
          pending.data.set(part.subarray(at, at + take), pendingHave)
          pendingHave += take
          at += take
          if (pendingHave < pending.data.length) return
          const done = pending
          pending = undefined
          onFrame(done.frame(done.data))
          continue
        }
        let header: FrameHead<F>
        const whole = headHave === 0 && part.length - at >= 4 ? format.length(part, at) : 0
        if (whole > 0 && part.length - at >= whole) {
          header = format.read(part, at)
          at += whole
        } else {
          const take = Math.min(part.length - at, headLength - headHave)
          head.set(part.subarray(at, at + take), headHave)
          headHave += take
          at += take
          if (headHave === 4 && headLength === 4) headLength = format.length(head, 0)
          if (headHave < headLength) continue
          header = format.read(head, 0)
          headHave = 0
          headLength = 4
        }
        if (part.length - at >= header.dataLength) {
          onFrame(header.frame(part.subarray(at, at + header.dataLength)))
          at += header.dataLength
        } else {
          pending = { data: new Uint8Array(header.dataLength), frame: header.frame }
          pendingHave = 0
        }
      }
    },
    end: (): void => {
      if (headHave > 0) throw new Error(TRUNCATED_HEADER)
      if (pending !== undefined) throw new Error(TRUNCATED_DATA)
    }
  }
}

/** Bare frames from a byte stream fed part by part (`splitFrames`). */
export const bareFrameSplitter = (onFrame: (frame: BareFrame) => void) => splitFrames(BARE_FORMAT, onFrame)

/** Hashed frames from a byte stream fed part by part (`splitFrames`): the hash as sent, not checked here. */
export const frameSplitter = (onFrame: (frame: Frame) => void) => splitFrames(HASHED_FORMAT, onFrame)
