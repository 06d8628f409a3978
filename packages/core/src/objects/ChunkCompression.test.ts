import { describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { zstdCompressSync } from "node:zlib"
import * as Blake3 from "./Blake3.ts"
import { encodeChunk, encodeChunkAsync, hasZstdMagic, plainChunkBytes } from "./ChunkCompression.ts"

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
})
