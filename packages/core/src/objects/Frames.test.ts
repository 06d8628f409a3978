import { describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { zstdCompressSync } from "node:zlib"
import * as Blake3 from "./Blake3.ts"
import { bareFrame, bareFramePlain, encodeChunk, namedBareFrame } from "./ChunkCompression.ts"
import {
  type BareFrame,
  bareFrameSplitter,
  bareFramesIn,
  decodeBareFrames,
  decodeFrames,
  encodeBareFrames,
  encodeFrames,
  type Frame,
  frameSplitter
} from "./Frames.ts"

const text = Buffer.from("export const value = compute(1) // a line that repeats\n".repeat(500))
const noise = randomBytes(70_000)

/** A body split into pieces of `size` bytes: frames cross network reads. */
async function* pieces(body: Uint8Array, size: number) {
  for (let i = 0; i < body.length; i += size) yield body.subarray(i, i + size)
}
/** `body` pushed through a splitter in parts of `size` bytes, each in a buffer of its own (as sockets deliver them). */
const splitInParts = <F>(splitter: (onFrame: (frame: F) => void) => { push: (part: Uint8Array) => void; end: () => void }, body: Uint8Array, size: number) => {
  const read: Array<F> = []
  const parts: Array<Uint8Array> = []
  const split = splitter((frame) => read.push(frame))
  for (let i = 0; i < body.length; i += size) {
    const part = Uint8Array.from(body.subarray(i, i + size))
    parts.push(part)
    split.push(part)
  }
  split.end()
  return { read, parts }
}
const collect = async <A>(frames: AsyncIterable<A>): Promise<Array<A>> => {
  const out: Array<A> = []
  for await (const frame of frames) out.push(frame)
  return out
}

describe("Frames", () => {
  it("hashed and bare frames read back the same across any split of the stream, empty chunks included", async () => {
    const chunks = [text, noise, new Uint8Array(0), Buffer.from("x")]
    const hashed: Array<Frame> = chunks.map((data) => ({ hash: Blake3.hash(data), data }))
    const bare: Array<BareFrame> = chunks.map((data) => bareFrame(data, encodeChunk(data)))
    expect(bare.map((f) => f.zstd)).toEqual([true, false, false, false])
    const hashedBody = Buffer.concat(encodeFrames(hashed))
    const bareBody = Buffer.concat(encodeBareFrames(bare))
    // 72 bytes of header a chunk against 4.
    expect(hashedBody.length - bareBody.length).toBe(68 * chunks.length + (text.length - bare[0]!.data.length))
    for (const size of [1, 3, 4096, 1 << 20]) {
      expect((await collect(decodeFrames(pieces(hashedBody, size)))).map((f) => Buffer.from(f.data))).toEqual(chunks.map((c) => Buffer.from(c)))
      const read = await collect(decodeBareFrames(pieces(bareBody, size)))
      expect(read.map((f) => Buffer.from(bareFramePlain(f, 1 << 20)))).toEqual(chunks.map((c) => Buffer.from(c)))
      expect(read.map((f) => f.zstd)).toEqual([true, false, false, false])
    }
  })

  it("a body read whole gives the same bare frames as the stream, as views into it, and names each chunk by its plain bytes", () => {
    const chunks = [text, noise, new Uint8Array(0), Buffer.from("x")]
    const body = Buffer.concat(encodeBareFrames(chunks.map((data) => bareFrame(data, encodeChunk(data)))))
    const read = [...bareFramesIn(body)]
    expect(read.map((f) => f.zstd)).toEqual([true, false, false, false])
    expect(read.map((f) => Buffer.from(bareFramePlain(f, 1 << 20)))).toEqual(chunks.map((c) => Buffer.from(c)))
    // No copy: the raw chunk is the body's own bytes.
    expect(read[1]!.data.buffer).toBe(body.buffer)
    expect(read.map((f) => namedBareFrame(f, 1 << 20)).map((c) => [c.hash, c.data.length])).toEqual(chunks.map((c) => [Blake3.hash(c), c.length]))
    expect([...bareFramesIn(new Uint8Array(0))]).toEqual([])
  })

  it("refuses truncated and oversized bare frames, and zstd that decompresses past the bound", async () => {
    const body = Buffer.concat(encodeBareFrames([{ data: noise, zstd: false }]))
    await expect(collect(decodeBareFrames(pieces(body.subarray(0, body.length - 1), 1000)))).rejects.toThrow(/truncated/)
    await expect(collect(decodeBareFrames(pieces(body.subarray(0, 2), 1000)))).rejects.toThrow(/truncated/)
    const huge = new Uint8Array(4)
    new DataView(huge.buffer).setUint32(0, 64 * 1024 * 1024 + 1)
    await expect(collect(decodeBareFrames(pieces(huge, 4)))).rejects.toThrow(/bad frame/)
    expect(() => [...bareFramesIn(body.subarray(0, body.length - 1))]).toThrow(/truncated/)
    expect(() => [...bareFramesIn(body.subarray(0, 2))]).toThrow(/truncated/)
    expect(() => [...bareFramesIn(huge)]).toThrow(/bad frame/)
    expect(() => bareFramePlain({ data: zstdCompressSync(text), zstd: true }, text.length - 1)).toThrow()
    expect(() => bareFramePlain({ data: noise, zstd: true }, 1 << 20)).toThrow()
  })
  it("a body pushed part by part gives the same bare frames as read whole, views of a part when a frame lies within it", () => {
    const chunks = [text, noise, new Uint8Array(0), Buffer.from("x")]
    const body = Buffer.concat(encodeBareFrames(chunks.map((data) => bareFrame(data, encodeChunk(data)))))
    for (const size of [1, 3, 4, 5, 4096, 1 << 20]) {
      const { read, parts } = splitInParts(bareFrameSplitter, body, size)
      expect(read.map((f) => f.zstd)).toEqual([true, false, false, false])
      expect(read.map((f) => Buffer.from(bareFramePlain(f, 1 << 20)))).toEqual(chunks.map((c) => Buffer.from(c)))
      if (size === 1 << 20) expect(read[1]!.data.buffer).toBe(parts[0]!.buffer)
    }
  })

  it("hashed frames pushed part by part read back as sent across any split, headers across parts included, views of a part when a frame lies within it", () => {
    const chunks = [text, noise, new Uint8Array(0), Buffer.from("x")]
    const frames: Array<Frame> = chunks.map((data, i) => ({ hash: i === 3 ? "h" : Blake3.hash(data), data }))
    const body = Buffer.concat(encodeFrames(frames))
    for (const size of [1, 3, 4, 5, 71, 72, 73, 4096, 1 << 20]) {
      const { read, parts } = splitInParts(frameSplitter, body, size)
      expect(read.map((f) => f.hash)).toEqual(frames.map((f) => f.hash))
      expect(read.map((f) => Buffer.from(f.data))).toEqual(chunks.map((c) => Buffer.from(c)))
      if (size === 1 << 20) expect(read[1]!.data.buffer).toBe(parts[0]!.buffer)
    }
  })

  it("the part-by-part splitter refuses a stream that ends inside a frame, and oversized frames", () => {
    const body = Buffer.concat(encodeBareFrames([{ data: noise, zstd: false }]))
    for (const cut of [2, 4, body.length - 1]) {
      const splitter = bareFrameSplitter(() => {})
      splitter.push(body.subarray(0, cut))
      expect(() => splitter.end()).toThrow(/truncated/)
    }
    const huge = new Uint8Array(4)
    new DataView(huge.buffer).setUint32(0, 64 * 1024 * 1024 + 1)
    expect(() => bareFrameSplitter(() => {}).push(huge)).toThrow(/bad frame/)
    const hashed = Buffer.concat(encodeFrames([{ hash: Blake3.hash(noise), data: noise }]))
    for (const cut of [2, 4, 40, 72, hashed.length - 1]) {
      const splitter = frameSplitter(() => {})
      splitter.push(hashed.subarray(0, cut))
      expect(() => splitter.end()).toThrow(/truncated/)
    }
    const badHash = new Uint8Array(4)
    new DataView(badHash.buffer).setUint32(0, 0xc000_0000)
    expect(() => frameSplitter(() => {}).push(badHash)).toThrow("bad frame: hash length 3221225472")
    const longData = Buffer.concat(encodeFrames([{ hash: "h", data: new Uint8Array(0) }]))
    new DataView(longData.buffer, longData.byteOffset).setUint32(5, 64 * 1024 * 1024 + 1)
    expect(() => frameSplitter(() => {}).push(longData)).toThrow(/bad frame: 67108865 bytes/)
  })
})
