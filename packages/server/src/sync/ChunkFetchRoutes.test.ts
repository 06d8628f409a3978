import { describe, expect, it } from "@effect/vitest"
import { fetchSlices, FIRST_SLICE, writeSized } from "./ChunkFetchRoutes.ts"

const bytes = (length: number, fill: number) => new Uint8Array(length).fill(fill)
const joined = (pieces: ReadonlyArray<Uint8Array>) => Buffer.concat(pieces)

describe("writeSized", () => {
  it("joins neighbours up to the bound and passes a piece of the bound or more as it is", () => {
    const header = bytes(4, 1)
    const small = bytes(30, 2)
    const large = bytes(100, 3)
    const pieces: ReadonlyArray<Uint8Array> = [header, small, header, small, header, large, header, small, bytes(64, 4), header]
    const out = writeSized(pieces, 64)
    // The same bytes, in order.
    expect(joined(out)).toEqual(joined(pieces))
    expect(out.map((b) => b.length)).toEqual([38, 34, 100, 34, 64, 4])
    // No copy of a large piece, nor of a piece left alone.
    expect(out[2]).toBe(large)
    expect(out[5]).toBe(header)
    for (const buffer of out) expect(buffer.length <= 64 || pieces.includes(buffer)).toBe(true)
  })

  it("answers nothing for nothing, and one piece as it is", () => {
    expect(writeSized([], 64)).toEqual([])
    const one = bytes(10, 5)
    expect(writeSized([one], 64)).toEqual([one])
    expect(writeSized([one], 64)[0]).toBe(one)
  })
})

describe("fetchSlices", () => {
  it("cuts a keyed fetch's hashes in a small first slice, then slices of one statement each, in order", () => {
    const hashes = Array.from({ length: 4_500 }, (_, i) => i)
    const slices = fetchSlices(hashes)
    expect(slices.map((s) => s.length)).toEqual([FIRST_SLICE, 2_000, 2_000, 4_500 - FIRST_SLICE - 4_000])
    expect(slices.flat()).toEqual(hashes)
    expect(fetchSlices(hashes.slice(0, 10))).toEqual([hashes.slice(0, 10)])
    expect(fetchSlices(hashes.slice(0, FIRST_SLICE + 1)).map((s) => s.length)).toEqual([FIRST_SLICE, 1])
    expect(fetchSlices([])).toEqual([])
  })
})
