/**
 * The identity of one blob's ordered chunk list, as the Oak client's `async_v1` blob proofs name
 * it: BLAKE3 over, per chunk in order, its index (u64 big-endian), offset (u64 BE), size (u32 BE)
 * and the ASCII of its hash's hex. Byte-exact: the client compares it with its own.
 */
import { hash as blake3 } from "./Blake3.ts"

export interface MappedChunk {
  readonly hash: string
  readonly offset: number
  readonly size: number
}

/** Bytes of one chunk's record: 8 + 8 + 4 + 64. */
const RECORD = 84

export const canonicalBytes = (chunks: ReadonlyArray<MappedChunk>): Uint8Array => {
  const out = Buffer.alloc(chunks.length * RECORD)
  chunks.forEach((chunk, index) => {
    const at = index * RECORD
    out.writeBigUInt64BE(BigInt(index), at)
    out.writeBigUInt64BE(BigInt(chunk.offset), at + 8)
    out.writeUInt32BE(chunk.size, at + 16)
    out.write(chunk.hash, at + 20, "latin1")
  })
  return out
}

export const mappingDigest = (chunks: ReadonlyArray<MappedChunk>): string => blake3(canonicalBytes(chunks))
