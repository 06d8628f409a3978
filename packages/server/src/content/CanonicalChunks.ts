/**
 * A large blob's chunk list as FastCDC cuts it. Files of CHUNKING_THRESHOLD bytes or more are split by FastCDC
 * (sync-protocol.md, Chunking), and their chunks dedup across versions and clients only when every blob is stored
 * under those cuts. A client may name such a blob by a list FastCDC never makes: Oak's staged push sends a 10-64 MiB
 * file it had inline as ONE chunk (its spill_inline_blobs_to_chunks), so a 20-byte patch of a 25 MB file uploaded
 * 24 MB again. The server stores such a blob under FastCDC's cuts of the same bytes instead, as it does for inline
 * content (PushPreparation), when it registers the blob: a mapping once stored is never changed. Only a blob proof
 * (staged-push/BlobProofs) takes such a list: an ordinary push refuses chunks above 4 MiB (Chunks.checkChunkMapping).
 * Readers follow the stored list (blobs/info, pull, chunks/download); the chunk the client sent stays while its proof
 * does (a day) and is then left to gc.
 */
import * as FastCdc from "@grove/core/chunking/FastCdc"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Effect, Stream } from "effect"
import { storeUploaded } from "./ChunkUploads.ts"
import { readChunks } from "./ChunkReads.ts"
import { ChunkStore, type UploadedChunk } from "./ChunkStore.ts"
import type { BlobInfo, Uploader } from "./ContentObjects.ts"

/** A list FastCDC never cuts for this blob: a chunk above its maximum in a blob it splits. Known without a read. */
export const isUncut = (blob: BlobInfo): boolean =>
  blob.size >= FastCdc.CHUNKING_THRESHOLD && blob.chunks.some((c) => c.size > FastCdc.MAX_SIZE)

/** Cut pieces stored per round: bounds what one blob holds in memory (the chunker keeps one max-size chunk more). */
const STORE_GROUP_BYTES = 16 * 1024 * 1024

/**
 * The bytes `chunks` hold, in order, cut by FastCDC, in one read: the hash of the whole and the pieces' list. The
 * pieces are stored and granted to `uploader` as they are cut (parts of chunks it could count as present, so the grant
 * gives nothing new); if the whole does not hash to the blob, they are left for gc.
 */
export const cutChunks = Effect.fnUntraced(function*(orgId: string, uploader: Uploader, chunks: BlobInfo["chunks"]) {
  const store = yield* ChunkStore
  const whole = yield* Blake3.makeHasher
  const chunker = new FastCdc.FastCdcChunker()
  const refs: Array<BlobInfo["chunks"][number]> = []
  let pending: Array<UploadedChunk> = []
  let pendingBytes = 0
  const take = (pieces: ReadonlyArray<FastCdc.Chunk>) => {
    for (const piece of pieces) {
      const hash = Blake3.hash(piece.data)
      refs.push({ hash, offset: piece.offset, size: piece.length })
      // Plain bytes hashed just now: ChunkStore need not hash them again.
      pending.push({ hash, data: piece.data, verified: true })
      pendingBytes += piece.length
    }
  }
  const flush = Effect.suspend(() => {
    const group = pending
    pending = []
    pendingBytes = 0
    return group.length === 0 ? Effect.void : storeUploaded(orgId, uploader, group)
  })
  yield* Stream.runForEach(readChunks(store, orgId, chunks), (bytes) =>
    Effect.suspend(() => {
      whole.update(bytes)
      take(chunker.push(bytes))
      return pendingBytes >= STORE_GROUP_BYTES ? flush : Effect.void
    }))
  take(chunker.finish())
  yield* flush
  return { hash: whole.digest(), chunks: refs as ReadonlyArray<BlobInfo["chunks"][number]> }
})

/**
 * Whether `blob`'s chunks, read in order, hash to it; answers the blob to register, or undefined when they do not.
 * An uncut list is answered as FastCDC cuts the bytes, whether or not the organization has the blob (registering keeps
 * a stored blob's list, ContentObjects.registerBlobs): what is done with the caller's bytes must not depend on blobs
 * it may not see, or the proof's answer and timing would tell it which hashes exist in other repositories.
 */
export const checkedBlob = Effect.fnUntraced(function*(orgId: string, uploader: Uploader, blob: BlobInfo) {
  if (isUncut(blob)) {
    const cut = yield* cutChunks(orgId, uploader, blob.chunks)
    return cut.hash === blob.hash ? { hash: blob.hash, size: blob.size, chunks: cut.chunks } as BlobInfo : undefined
  }
  const store = yield* ChunkStore
  return (yield* Blake3.hashStream(readChunks(store, orgId, blob.chunks))).hash === blob.hash ? blob : undefined
})
