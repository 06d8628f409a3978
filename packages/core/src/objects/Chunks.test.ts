import { describe, expect, it } from "@effect/vitest"
import { hash } from "./Blake3.ts"
import { CHUNK_MAX_SIZE, CHUNKING_THRESHOLD, checkChunkMapping, checkSize } from "./Chunks.ts"

const EMPTY = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
const HELLO = "d74981efa70a0c880b8d8c1985d075dbcbf679b99a5f9914e5aaf96b831a9e24"
const A = hash("a")
const B = hash("b")
const C = hash("c")
const MiB = 1024 * 1024

describe("Chunks", () => {
  it("accepts sizes that are non-negative safe integers only", () => {
    for (const good of [0, 1, 64 * MiB, Number.MAX_SAFE_INTEGER]) expect(checkSize(good).ok).toBe(true)
    for (const bad of [-1, 1.5, Number.NaN, Infinity, 2 ** 53, "1", null, undefined]) expect(checkSize(bad).ok, String(bad)).toBe(false)
  })

  it("maps a small blob to one chunk with its own hash", () => {
    expect(checkChunkMapping({ hash: HELLO, size: 11 }, [{ hash: HELLO, offset: 0, size: 11 }]).ok).toBe(true)
    expect(checkChunkMapping({ hash: EMPTY, size: 0 }, [{ hash: EMPTY, offset: 0, size: 0 }]).ok).toBe(true)
    expect(checkChunkMapping({ hash: HELLO, size: 11 }, [{ hash: A, offset: 0, size: 11 }]).ok).toBe(false)
    expect(checkChunkMapping({ hash: HELLO, size: 11 }, [{ hash: HELLO, offset: 0, size: 5 }, { hash: A, offset: 5, size: 6 }]).ok).toBe(false)
    expect(checkChunkMapping({ hash: HELLO, size: 11 }, []).ok).toBe(false)
  })

  it("requires contiguous offsets from 0 that add up to the blob size", () => {
    const size = CHUNKING_THRESHOLD + 4 * MiB
    const chunks = [
      { hash: A, offset: 0, size: 4 * MiB },
      { hash: B, offset: 4 * MiB, size: 4 * MiB },
      { hash: A, offset: 8 * MiB, size: 4 * MiB }, // repeated content is fine
      { hash: C, offset: 12 * MiB, size: size - 12 * MiB }
    ]
    expect(checkChunkMapping({ hash: HELLO, size }, chunks).ok).toBe(true)
    expect(checkChunkMapping({ hash: HELLO, size: size + 1 }, chunks).ok).toBe(false)
    expect(checkChunkMapping({ hash: HELLO, size }, chunks.slice(1)).ok).toBe(false) // does not start at 0
    expect(checkChunkMapping({ hash: HELLO, size }, [chunks[0]!, { ...chunks[1]!, offset: 4 * MiB + 1 }, chunks[2]!, chunks[3]!]).ok).toBe(false) // gap
    expect(checkChunkMapping({ hash: HELLO, size }, [...chunks.slice(0, 3), { ...chunks[3]!, hash: C.toUpperCase() }]).ok).toBe(false)
    expect(checkChunkMapping({ hash: "nope", size }, chunks).ok).toBe(false)
    expect(checkChunkMapping({ hash: HELLO, size: -1 }, chunks).ok).toBe(false)
  })

  it("bounds the chunks of a large blob by the FastCDC maximum and forbids empty ones", () => {
    const size = CHUNKING_THRESHOLD
    expect(checkChunkMapping({ hash: HELLO, size }, [{ hash: A, offset: 0, size: CHUNK_MAX_SIZE + 1 }, { hash: B, offset: CHUNK_MAX_SIZE + 1, size: size - CHUNK_MAX_SIZE - 1 }]).ok).toBe(false)
    const three = [{ hash: A, offset: 0, size: 4 * MiB }, { hash: B, offset: 4 * MiB, size: 4 * MiB }, { hash: C, offset: 8 * MiB, size: 2 * MiB }]
    expect(checkChunkMapping({ hash: HELLO, size }, three).ok).toBe(true)
    expect(checkChunkMapping({ hash: HELLO, size }, [...three, { hash: EMPTY, offset: size, size: 0 }]).ok).toBe(false)
  })
})
