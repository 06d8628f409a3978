/**
 * Blob -> chunk mappings and the size limits of the chunk endpoints. Only the structure is
 * checked here; that the chunks' bytes hash to the blob hash needs the bytes (see Blake3.makeHasher).
 */
import type { NameCheck } from "../Names.ts"
// From Names.ts, not Blake3.ts: the client reads these limits before Effect and a BLAKE3 backend load (cli SmallPush.ts).
import { checkHash } from "../Names.ts"
import type { Hash } from "./Blake3.ts"

const MiB = 1024 * 1024

/** Files of this size or more are split by FastCDC; smaller ones travel whole, as one chunk. */
export const CHUNKING_THRESHOLD = 10 * MiB
export const CHUNK_MIN_SIZE = 256 * 1024
export const CHUNK_AVG_SIZE = MiB
export const CHUNK_MAX_SIZE = 4 * MiB
/** Body limit of `PUT chunks/{hash}` and of one `chunks/batch` request. */
export const MAX_UPLOAD_BYTES = 64 * MiB
export const MAX_BATCH_ENTRIES = 256

export interface ChunkRef {
  readonly hash: Hash
  readonly offset: number
  readonly size: number
}

const ok: NameCheck = { ok: true }
const fail = (reason: string): NameCheck => ({ ok: false, reason })

/** Sizes and offsets are non-negative integers that JSON numbers carry exactly. */
export const checkSize = (value: unknown, what = "size"): NameCheck =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0
    ? ok
    : fail(`${what} must be a non-negative integer`)

/**
 * A blob's chunk list: every hash valid, offsets contiguous from 0, sizes adding up to the blob
 * size. A blob under the chunking threshold is exactly one chunk carrying the blob's own hash;
 * a larger one is FastCDC output, so no chunk is empty or above the maximum chunk size.
 */
export const checkChunkMapping = (blob: { readonly hash: string; readonly size: number }, chunks: ReadonlyArray<ChunkRef>): NameCheck => {
  const blobHash = checkHash(blob.hash, "blob hash")
  if (!blobHash.ok) return blobHash
  const blobSize = checkSize(blob.size, "blob size")
  if (!blobSize.ok) return blobSize
  if (chunks.length === 0) return fail("a blob must map to at least one chunk")
  let offset = 0
  for (const [i, chunk] of chunks.entries()) {
    const h = checkHash(chunk.hash, `chunk ${i} hash`)
    if (!h.ok) return h
    const s = checkSize(chunk.size, `chunk ${i} size`)
    if (!s.ok) return s
    const o = checkSize(chunk.offset, `chunk ${i} offset`)
    if (!o.ok) return o
    if (chunk.offset !== offset) return fail(`chunk ${i} starts at ${chunk.offset}, expected ${offset}`)
    offset += chunk.size
  }
  if (offset !== blob.size) return fail(`chunk sizes add up to ${offset}, blob size is ${blob.size}`)
  if (blob.size < CHUNKING_THRESHOLD) {
    const only = chunks[0]
    if (chunks.length !== 1 || only?.hash !== blob.hash) {
      return fail("a blob under the chunking threshold must be one chunk with the blob's hash")
    }
    return ok
  }
  for (const [i, chunk] of chunks.entries()) {
    if (chunk.size === 0 || chunk.size > CHUNK_MAX_SIZE) return fail(`chunk ${i} size must be between 1 and ${CHUNK_MAX_SIZE}`)
  }
  return ok
}
