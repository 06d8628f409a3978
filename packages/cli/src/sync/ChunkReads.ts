/**
 * What an upload reads from the files (sync/Upload.ts): a large file's FastCDC chunk list, a chunk's bytes, and a
 * batch's chunks read straight into its body.
 */
import type { ApiSync } from "@grove/api"
import { FastCdc, Objects } from "@grove/core"
import { createReadStream } from "node:fs"
import * as fs from "node:fs/promises"
import type { ChunkSource, OutgoingBlob } from "./Outgoing.ts"
import { isLarge, READ_SYNC_BELOW, readRangeSync, shorter } from "./Outgoing.ts"

/** The chunk list of a file: itself under the threshold, else FastCDC chunks hashed one by one. */
export const chunkFile = async (blob: OutgoingBlob): Promise<Array<ApiSync.ChunkRefData>> => {
  if (!isLarge(blob)) return [{ hash: blob.hash, offset: 0, size: blob.size }]
  const chunker = new FastCdc.FastCdcChunker()
  const refs: Array<ApiSync.ChunkRefData> = []
  const take = (chunks: ReadonlyArray<FastCdc.Chunk>) => {
    for (const c of chunks) refs.push({ hash: Objects.Blake3.hash(c.data), offset: c.offset, size: c.length })
  }
  for await (const piece of createReadStream(blob.file, { highWaterMark: 1024 * 1024 })) take(chunker.push(piece as Buffer))
  take(chunker.finish())
  return refs
}

/** A chunk's bytes, into `data` when given (its size). */
export const readRange = async (source: ChunkSource, data: Uint8Array = new Uint8Array(source.size)): Promise<Uint8Array> => {
  if (source.size < READ_SYNC_BELOW) return readRangeSync(source, data)
  const handle = await fs.open(source.file, "r")
  try {
    let read = 0
    while (read < source.size) {
      const { bytesRead } = await handle.read(data, read, source.size - read, source.offset + read)
      if (bytesRead === 0) throw shorter(source.file)
      read += bytesRead
    }
    return data
  } finally {
    await handle.close()
  }
}

/** A chunk's bytes, a view into its batch's body. */
export interface ReadChunk {
  readonly hash: string
  readonly data: Uint8Array
}

/** A batch read: its plain frames (bare or hashed, as `bare` says) in one buffer, each chunk's bytes a view of it. */
export interface ReadBatch {
  readonly body: Buffer
  readonly bare: boolean
  readonly chunks: ReadonlyArray<ReadChunk>
}

/**
 * Reads a batch's chunks straight into its body as plain frames (headers by `Frames.writeFrameHeader`, as
 * `encodeBareFrames` and `encodeFrames` write them): one buffer a batch, no copy of the chunks into it afterwards.
 * Ranges of READ_SYNC_BELOW or more are read on the thread pool, several at once.
 */
export const readBatch = async (batch: ReadonlyArray<ChunkSource>, bare: boolean): Promise<ReadBatch> => {
  let size = 0
  for (const c of batch) size += Objects.Frames.frameHeaderLength(bare ? undefined : c.hash) + c.size
  const body = Buffer.allocUnsafeSlow(size)
  const chunks: Array<ReadChunk> = []
  const pending: Array<Promise<void>> = []
  let at = 0
  for (const c of batch) {
    at = Objects.Frames.writeFrameHeader(body, at, bare ? undefined : c.hash, c.size)
    const data = body.subarray(at, at + c.size)
    if (c.size < READ_SYNC_BELOW) readRangeSync(c, data)
    else pending.push(readRange(c, data).then(() => undefined))
    chunks.push({ hash: c.hash, data })
    at += c.size
  }
  await Promise.all(pending)
  return { body, bare, chunks }
}
