import { describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { constants, createZstdCompress, zstdCompressSync } from "node:zlib"
import * as Blake3 from "./Blake3.ts"
import { bareFramePlain, encodeChunk, encodeChunkAsync, frameContentSize, hasZstdMagic, plainChunkBytes } from "./ChunkCompression.ts"

const text = Buffer.from("export const value = compute(1) // a line that repeats\n".repeat(2000))
const noise = randomBytes(300 * 1024)

describe("ChunkCompression", () => {
  it("compresses what shrinks and leaves incompressible or tiny chunks as they are", async () => {
    const small = encodeChunk(text.subarray(0, 5000))
    expect(hasZstdMagic(small) && small.length < 1000).toBe(true)
    for (const encoded of [encodeChunk(text), await encodeChunkAsync(text)]) {
      expect(hasZstdMagic(encoded) && encoded.length < text.length / 20).toBe(true)
      expect(Buffer.from(plainChunkBytes(Blake3.hash(text), encoded, text.length)!).equals(text)).toBe(true)
    }
    expect(encodeChunk(noise)).toBe(noise) // the sample did not shrink: not even tried whole
    expect(await encodeChunkAsync(noise)).toBe(noise)
    expect(encodeChunk(noise.subarray(0, 4000))).toEqual(noise.subarray(0, 4000))
    const tiny = Buffer.from("hi\n")
    expect(encodeChunk(tiny)).toBe(tiny)
  })

  it("reads a chunk by the protocol's rule: zstd that decompresses to the hash, else the raw bytes", () => {
    const hash = Blake3.hash(text)
    expect(plainChunkBytes(hash, text, text.length)).toBe(text)
    // Raw bytes that start with the magic (a .zst file) are still raw when they hash to the name.
    const lookalike = Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), noise.subarray(0, 100)])
    expect(plainChunkBytes(Blake3.hash(lookalike), lookalike, lookalike.length)).toBe(lookalike)
    // A zstd file stored as such: its own bytes hash to the name, its decompression does not.
    const zst = zstdCompressSync(text)
    expect(Buffer.from(plainChunkBytes(Blake3.hash(zst), zst, 10 * text.length)!).equals(zst)).toBe(true)
    // Wrong bytes, or more plain bytes than allowed: not the chunk.
    expect(plainChunkBytes(hash, encodeChunk(noise), text.length)).toBeUndefined()
    expect(plainChunkBytes(hash, zst, text.length - 1)).toBeUndefined()
  })

  it("reads the plain size a frame's header declares, in each width of the field", async () => {
    const long = Buffer.concat([text, text, text])
    for (const size of [0, 100, 255, 256, 5000, 65791, 65792, 300 * 1024]) {
      const plain = long.subarray(0, size)
      expect(frameContentSize(zstdCompressSync(plain))).toBe(size)
      // A smaller window than the chunk: the header has a window byte before the size.
      const windowed = zstdCompressSync(plain, { params: { [constants.ZSTD_c_windowLog]: 10, [constants.ZSTD_c_checksumFlag]: 1 } })
      expect(frameContentSize(windowed)).toBe(size)
    }
    // A streamed frame does not say; neither do bytes that are not zstd.
    const streamed = await new Promise<Buffer>((resolve) => {
      const parts: Array<Buffer> = []
      const zstd = createZstdCompress().on("data", (part: Buffer) => parts.push(part)).on("end", () => resolve(Buffer.concat(parts)))
      zstd.write(text.subarray(0, 5000))
      zstd.flush(() => zstd.end(text.subarray(5000, 9000)))
    })
    expect(frameContentSize(streamed)).toBeUndefined()
    expect(Buffer.from(bareFramePlain({ data: streamed, zstd: true }, 9000)).equals(text.subarray(0, 9000))).toBe(true)
    expect(frameContentSize(text)).toBeUndefined()
    expect(frameContentSize(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]))).toBeUndefined()
  })

  it("does not take a frame whose header understates its plain size", () => {
    const chunk = text.subarray(0, 5000)
    const sent = Buffer.from(zstdCompressSync(chunk))
    expect(frameContentSize(sent)).toBe(5000)
    // The size field (2 bytes, minus 256) of a single-segment frame says 4,000.
    expect(sent[4]! >> 6).toBe(1)
    sent.writeUInt16LE(4000 - 256, 5)
    expect(frameContentSize(sent)).toBe(4000)
    expect(plainChunkBytes(Blake3.hash(chunk), sent, 64 * 1024 * 1024)).toBeUndefined()
    expect(() => bareFramePlain({ data: sent, zstd: true }, 64 * 1024 * 1024)).toThrow()
  })
  it("sizes its output by a frame's declared size only up to a chunk's largest (a tiny frame declaring 64 MiB)", () => {
    // Magic, single segment with a 4-byte content size of 64 MiB, then one last raw block of 5 bytes.
    const declared = 64 * 1024 * 1024
    const header = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0, 0, 0, 0])
    header.writeUInt32LE(declared, 5)
    const block = (5 << 3) | 1
    const bogus = Buffer.concat([header, Buffer.from([block & 0xff, block >> 8, 0]), Buffer.from("hello")])
    expect(frameContentSize(bogus)).toBe(declared)
    const before = process.memoryUsage().arrayBuffers
    for (let i = 0; i < 4; i++) expect(plainChunkBytes(Blake3.hash("hello"), bogus, declared)).toBeUndefined()
    // Sized by the header, each attempt would take 64 MiB until a collection (256 MiB here).
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(16 * 1024 * 1024)
  })
})
