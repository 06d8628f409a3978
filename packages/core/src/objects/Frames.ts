/**
 * The binary frame format of `chunks/batch` (upload) and `chunks/fetch`
 * (download): repeated `u32 BE hash length, hash (UTF-8 hex), u32 BE data
 * length, data`.
 */

export interface Frame {
  readonly hash: string
  readonly data: Uint8Array
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** The frames of one request body, as pieces to concatenate (no copy of the data). */
export const encodeFrames = (frames: ReadonlyArray<Frame>): Array<Uint8Array> => {
  const pieces: Array<Uint8Array> = []
  for (const frame of frames) {
    const hash = encoder.encode(frame.hash)
    const header = new Uint8Array(4 + hash.length + 4)
    const view = new DataView(header.buffer)
    view.setUint32(0, hash.length)
    header.set(hash, 4)
    view.setUint32(4 + hash.length, frame.data.length)
    pieces.push(header, frame.data)
  }
  return pieces
}

/** Longest hash field accepted (a BLAKE3 hex hash is 64). */
const MAX_HASH_LENGTH = 128
/** Largest data field accepted: a blob under the chunking threshold travels as one chunk. */
export const MAX_FRAME_DATA = 64 * 1024 * 1024

/**
 * Frames from a byte stream, as they complete. Holds at most one frame's data
 * plus one network read in memory.
 */
export async function* decodeFrames(body: AsyncIterable<Uint8Array>): AsyncGenerator<Frame> {
  let buffer: Uint8Array = new Uint8Array(0)
  let start = 0
  const available = () => buffer.length - start
  const append = (piece: Uint8Array) => {
    const rest = buffer.subarray(start)
    const next = new Uint8Array(rest.length + piece.length)
    next.set(rest, 0)
    next.set(piece, rest.length)
    buffer = next
    start = 0
  }
  const iterator = body[Symbol.asyncIterator]()
  const fill = async (n: number): Promise<boolean> => {
    while (available() < n) {
      const next = await iterator.next()
      if (next.done === true) return false
      append(next.value)
    }
    return true
  }
  const u32 = (at: number) => new DataView(buffer.buffer, buffer.byteOffset + at, 4).getUint32(0)
  while (true) {
    if (!(await fill(4))) {
      if (available() === 0) return
      throw new Error("truncated chunk stream (in a frame header)")
    }
    const hashLength = u32(start)
    if (hashLength === 0 || hashLength > MAX_HASH_LENGTH) throw new Error(`bad frame: hash length ${hashLength}`)
    if (!(await fill(4 + hashLength + 4))) throw new Error("truncated chunk stream (in a frame header)")
    const hash = decoder.decode(buffer.subarray(start + 4, start + 4 + hashLength))
    const dataLength = u32(start + 4 + hashLength)
    if (dataLength > MAX_FRAME_DATA) throw new Error(`bad frame: ${dataLength} bytes for one chunk`)
    start += 8 + hashLength
    // Read the data straight into its own buffer rather than growing the shared one.
    const data = new Uint8Array(dataLength)
    const have = Math.min(available(), dataLength)
    data.set(buffer.subarray(start, start + have), 0)
    start += have
    let filled = have
    while (filled < dataLength) {
      const next = await iterator.next()
      if (next.done === true) throw new Error(`truncated chunk stream (in the data of ${hash})`)
      const piece = next.value
      const take = Math.min(piece.length, dataLength - filled)
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
    yield { hash, data }
  }
}
