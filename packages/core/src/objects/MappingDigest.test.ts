import { describe, expect, it } from "@effect/vitest"
import { hash } from "./Blake3.ts"
import { canonicalBytes, mappingDigest } from "./MappingDigest.ts"

const a = "a".repeat(64)
const b = "0123456789abcdef".repeat(4)

describe("MappingDigest", () => {
  it("lays out each chunk as u64 BE index, u64 BE offset, u32 BE size, then the hash's hex", () => {
    const bytes = canonicalBytes([{ hash: a, offset: 0, size: 5 }, { hash: b, offset: 5, size: 0x01020304 }])
    expect(bytes.length).toBe(168)
    expect([...bytes.subarray(0, 20)]).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5])
    expect(Buffer.from(bytes.subarray(20, 84)).toString("latin1")).toBe(a)
    expect([...bytes.subarray(84, 104)]).toEqual([0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4])
    expect(Buffer.from(bytes.subarray(104)).toString("latin1")).toBe(b)
  })

  it("offsets past 4 GiB keep their high bytes", () => {
    const bytes = canonicalBytes([{ hash: a, offset: 2 ** 40 + 7, size: 1 }])
    expect([...bytes.subarray(8, 16)]).toEqual([0, 0, 1, 0, 0, 0, 0, 7])
  })

  it("is the BLAKE3 of those bytes, and changes with order", () => {
    const chunks = [{ hash: a, offset: 0, size: 5 }, { hash: b, offset: 5, size: 9 }]
    expect(mappingDigest(chunks)).toBe(hash(canonicalBytes(chunks)))
    expect(mappingDigest([])).toBe(hash(new Uint8Array(0)))
    expect(mappingDigest(chunks)).not.toBe(mappingDigest([{ ...chunks[1]!, offset: 0 }, { ...chunks[0]!, offset: 9 }]))
  })
})
