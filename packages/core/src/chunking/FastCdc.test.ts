import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { createBLAKE3 } from "hash-wasm"
import fixture from "./fixtures/fastcdc-v2020.json" with { type: "json" }
import { AVG_SIZE, boundaries, chunkStream, FastCdcChunker, gearTable, MAX_SIZE, MIN_SIZE } from "./FastCdc.ts"
import type { ChunkBoundary, Options } from "./FastCdc.ts"
import { generate } from "./TestInputs.ts"
import type { Generator } from "./TestInputs.ts"

const MIB = 1024 * 1024

const blake3Hex = async (data: Uint8Array): Promise<string> => {
  const hasher = await createBLAKE3()
  return hasher.init().update(data).digest("hex")
}

// Irregular piece sizes, so pieces straddle every kind of boundary.
const PIECES = [1, 7, 65_536, 3 * MIB + 1, 333, 5 * MIB, 1_000_003]

const streamed = (data: Uint8Array, options?: Options) => {
  const chunker = new FastCdcChunker(options)
  const chunks = []
  for (let at = 0, i = 0; at < data.length; i++) {
    const n = PIECES[i % PIECES.length]!
    chunks.push(...chunker.push(data.subarray(at, at + n)))
    at += n
  }
  chunks.push(...chunker.finish())
  return chunks
}

const inputs = fixture.inputs.map((input) => ({
  ...input,
  name: `${input.generator}(seed ${input.seed}, ${input.size} bytes)`,
  data: generate(input.generator as Generator, input.seed, input.size)
}))

describe("FastCdc", () => {
  it("uses the crate's parameters and Gear table", () => {
    expect([fixture.minSize, fixture.avgSize, fixture.maxSize]).toEqual([MIN_SIZE, AVG_SIZE, MAX_SIZE])
    expect(gearTable()).toEqual(fixture.gear)
  })

  it("regenerates the fixture's inputs byte for byte", async () => {
    for (const input of inputs) expect(await blake3Hex(input.data), input.name).toBe(input.blake3)
  })

  it("cuts every fixture input exactly where the Rust crate does", async () => {
    for (const input of inputs) {
      const expected = input.chunks.map(({ length, offset }) => ({ offset, length }))
      expect(boundaries(input.data), input.name).toEqual(expected)
      // The fixture's chunk hashes are BLAKE3 of exactly these bytes.
      for (const chunk of input.chunks) {
        expect(await blake3Hex(input.data.subarray(chunk.offset, chunk.offset + chunk.length))).toBe(chunk.hash)
      }
    }
  })

  it("streams to the same chunks and bytes as the single-buffer path", () => {
    for (const input of inputs) {
      const chunks = streamed(input.data)
      expect(chunks.map(({ length, offset }) => ({ offset, length })), input.name).toEqual(boundaries(input.data))
      for (const chunk of chunks) {
        expect(Buffer.from(chunk.data).equals(input.data.subarray(chunk.offset, chunk.offset + chunk.length))).toBe(true)
      }
    }
  })

  it("agrees between streaming and single-buffer with small sizes and many chunks", () => {
    const options = { minSize: 64, avgSize: 256, maxSize: 1024 }
    for (const generator of ["xorshift32", "xorshift32-acgt", "zeros"] as const) {
      const data = generate(generator, 99, 200_003)
      const expected = boundaries(data, options)
      expect(expected.length).toBeGreaterThan(150)
      expect(streamed(data, options).map(({ length, offset }) => ({ offset, length }))).toEqual(expected)
    }
  })

  it("handles empty and tiny inputs", () => {
    expect(boundaries(new Uint8Array(0))).toEqual([])
    expect(boundaries(new Uint8Array(5))).toEqual([{ offset: 0, length: 5 }])
    const chunker = new FastCdcChunker()
    expect(chunker.push(new Uint8Array(0))).toEqual([])
    expect(chunker.finish()).toEqual([])
  })

  it("resynchronises after a one-byte insert at the start of 50 MiB", () => {
    const original = generate("xorshift32", 5, 50 * MIB)
    const edited = new Uint8Array(original.length + 1)
    edited[0] = 0x5a
    edited.set(original, 1)
    const key = (b: ChunkBoundary) => `${b.offset}:${b.length}`
    const before = new Set(boundaries(original).map(key))
    const after = boundaries(edited)
    // Shift the edited chunks back by the inserted byte; all but the first one or two must match.
    const changed = after.filter((b, i) => !before.has(key(i === 0 ? b : { offset: b.offset - 1, length: b.length })))
    expect(after.length).toBeGreaterThan(30)
    expect(changed.length).toBeLessThanOrEqual(2)
  })

  it.effect("chunks an Effect Stream", () =>
    Effect.gen(function*() {
      const input = inputs[1]!
      const pieces = []
      for (let at = 0; at < input.data.length; at += 999_999) pieces.push(input.data.subarray(at, at + 999_999))
      const chunks = yield* Stream.runCollect(chunkStream(Stream.fromArray(pieces)))
      expect(chunks.map(({ length, offset }) => ({ offset, length }))).toEqual(
        input.chunks.map(({ length, offset }) => ({ offset, length }))
      )
    }))
})
