/**
 * Fetching blobs for a clone, pull, merge or diff: the chunks of every blob
 * come through the binary `chunks/fetch` route in batches (<= 16 MiB, three
 * in flight, each answer taken as it arrives), each chunk is checked against its BLAKE3 hash and
 * written at its offsets, and every reassembled blob is hashed again before it
 * is handed over. Files land in a temp directory as `<blob hash>`; whole small
 * blobs are written on the thread pool, several at once (`concurrentWrites`),
 * while the next frames are read and verified, unless the caller places them
 * itself (`placeBytes`: a clone writes them straight into the working tree). Frames come bare (no hash in them, `chunk_frames:
 * bare_v1`) from a server that has them: the hash is taken from the bytes, as verifying needs anyway. An answer
 * whose connection breaks part-way is asked again for the chunks not taken yet (RemoteRepo's retry budget).
 */
import type { ApiSync } from "@grove/api"
import { Objects } from "@grove/core"
import { Effect } from "effect"
import * as fsSync from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { CliFailure } from "../Failures.ts"
import { hashFile } from "../local/Hashing.ts"
import { concurrentWrites } from "../local/Io.ts"
import { bodyCompressionEnabled, COMPRESS_FROM, downloadCompression, serverTakesZstd, zstd } from "./BodyCompression.ts"
import { inBatches } from "./Batches.ts"
import { makeProgress } from "./Progress.ts"
import type { EarlyFetch, FetchHooks } from "./EarlyFetch.ts"
import type { BinaryInit, RemoteRepo } from "./RemoteRepo.ts"
import { bareFrames, stoppableTransfer, transfer } from "./RemoteRepo.ts"

export interface IncomingBlob {
  readonly hash: string
  readonly size: number
  readonly chunks?: ReadonlyArray<ApiSync.ChunkRefData> | undefined
}

const BATCH_BYTES = 16 * 1024 * 1024
const BATCH_HASHES = 4096
export const IN_FLIGHT = 3
const { ChunkCompression, Frames } = Objects
/** The route that answers framed chunk bytes; see packages/server/src/sync/ChunkFetchRoutes.ts. */
export const FETCH_ROUTE = "chunks/fetch"

interface Placement {
  readonly blob: string
  readonly offset: number
}

/**
 * A bare frame names its chunk by its bytes: bytes that name no chunk asked for were damaged (on the way or on the
 * server), as a flipped byte is; the same chunk a second time is the server's mistake.
 */
const strayChunk = (hash: string, again: boolean): Error =>
  new Error(
    again
      ? `the server sent chunk ${hash} twice`
      : `the server sent corrupt bytes: a chunk of its answer hashes to ${hash}, which is none of the chunks asked for`
  )

/** Hashed frames, each checked against its hash (the bytes may be zstd when the answer says so). */
async function* checkedFrames(body: AsyncIterable<Uint8Array>, compressed: boolean, sizes: ReadonlyMap<string, number>) {
  for await (const frame of Frames.decodeFrames(body)) {
    const size = sizes.get(frame.hash)
    if (size === undefined) throw new Error(`the server sent an unrequested chunk ${frame.hash}`)
    const data = compressed
      ? ChunkCompression.plainChunkBytes(frame.hash, frame.data, size)
      : Objects.Blake3.hash(frame.data) === frame.hash ? frame.data : undefined
    if (data === undefined) throw new Error(`chunk ${frame.hash} does not match its hash`)
    yield { hash: frame.hash, data }
  }
}

async function* once(body: Uint8Array) {
  yield body
}

/** Completes chunk lists the pull left out, with `blobs/info`. */
const withChunkLists = (remote: RemoteRepo, blobs: ReadonlyArray<IncomingBlob>) =>
  Effect.gen(function*() {
    const lacking = blobs.filter((b) => b.size > 0 && (b.chunks === undefined || b.chunks.length === 0)).map((b) => b.hash)
    if (lacking.length === 0) return blobs
    const known = new Map<string, IncomingBlob>()
    for (let i = 0; i < lacking.length; i += 10_000) {
      const answer = yield* remote.connection.call(remote.connection.client.sync.blobsInfo({
        params: { owner: remote.owner, name: remote.name },
        payload: { hashes: lacking.slice(i, i + 10_000) }
      }))
      for (const blob of answer.blobs) known.set(blob.hash, blob)
    }
    return blobs.map((b) => known.get(b.hash) ?? b)
  })

/** Chunk hashes, each once and in order (`chunkSizes`' keys), in batches of at most BATCH_HASHES and BATCH_BYTES. */
export const batchesOf = (chunkSizes: ReadonlyMap<string, number>): Array<Array<string>> =>
  inBatches(chunkSizes, ([, size]) => size, BATCH_HASHES, BATCH_BYTES).map((batch) => batch.map(([hash]) => hash))

/** Whether chunks/fetch hash lists to `site` go zstd (when the server takes zstd bodies); the capabilities are asked for them only then. */
export const squeezesHashLists = (site: string): boolean => bodyCompressionEnabled() && downloadCompression(site)

/**
 * A chunks/fetch request for `hashes`: at once (no promise) when its hash list goes plain, as to a server on this
 * machine, so a clone's first requests leave before it checks the pull answer (EarlyFetch.ts); a list that may go zstd
 * waits for the server's capabilities.
 */
export const fetchRequest = (remote: RemoteRepo, hashes: ReadonlyArray<string>): BinaryInit | Promise<BinaryInit> => {
  // Asked for zstd frames: a server that does not compress ignores the field and answers raw. Bare frames asked for
  // too: a server without them ignores the field and answers hashed frames.
  const json = Buffer.from(JSON.stringify({
    hashes,
    ...(downloadCompression(remote.site) ? { compression: ChunkCompression.ZSTD_V1 } : {}),
    ...(bareFrames() ? { frames: Frames.BARE_V1 } : {})
  }))
  const plain: BinaryInit = { method: "POST", body: json, contentType: "application/json" }
  // A long hash list goes zstd to a server that takes zstd bodies (body_compression), unless the server is on this
  // machine: as for the answers (downloadCompression), the bytes cost nothing there and zstd does (random hex halves).
  if (json.length < COMPRESS_FROM || !squeezesHashLists(remote.site)) return plain
  return serverTakesZstd(remote.site, remote.token).then(async (takes) =>
    takes ? { ...plain, body: await zstd(json), contentEncoding: "zstd" } : plain
  )
}

/**
 * The blobs of a download, each once (the empty blob needs no transfer, whatever size the caller guessed), and their
 * chunks' sizes (undefined while a chunk list is missing).
 */
export const plan = (wanted: ReadonlyArray<IncomingBlob>) => {
  const blobs = [...new Map(wanted.map((b) => [b.hash, b.hash === Objects.Blake3.EMPTY_HASH ? { hash: b.hash, size: 0 } : b])).values()]
  const chunkSizes = new Map<string, number>()
  for (const blob of blobs) {
    if (blob.size === 0) continue
    if (blob.chunks === undefined || blob.chunks.length === 0) return { blobs, chunkSizes: undefined }
    for (const c of blob.chunks) chunkSizes.set(c.hash, c.size)
  }
  return { blobs, chunkSizes }
}

/**
 * Downloads `blobs` into `dir` and answers where each one is. Fails when the server omits a
 * chunk (it may not be readable by this caller) or sends bytes that do not match a hash.
 */
export const downloadBlobs = (
  remote: RemoteRepo,
  wanted: ReadonlyArray<IncomingBlob>,
  dir: string,
  /** Takes a whole blob's verified bytes; true when it needs no file in `dir` (it is then not in the answer). */
  placeBytes?: (hash: string, data: Uint8Array) => boolean,
  /** Called once the first batches' requests are sent (the caller's own work can then run while the server reads). */
  onRequested?: () => void,
  /** Requests sent already (`fetchEarly`): a batch of the same hashes takes its answer instead of asking again. */
  early?: EarlyFetch
): Effect.Effect<Map<string, string>, CliFailure> =>
  Effect.gen(function*() {
    // The very list the early requests were planned from: their batches are this download's.
    const planned = early?.wanted === wanted ? early : undefined
    const blobs = planned?.blobs ?? (yield* withChunkLists(remote, plan(wanted).blobs))
    const files = new Map<string, string>()
    const delivered = new Set<string>()
    const placements = new Map<string, Array<Placement>>()
    const chunkSizes = new Map<string, number>()
    const remaining = new Map<string, number>()
    /** A clone's large blobs hashed as their chunks are written in order (else read back once whole): the next offset. */
    const hashing = new Map<string, { readonly hasher: Objects.Blake3.Hasher; next: number }>()
    const partial = (hash: string) => path.join(dir, `${hash}.part`)
    yield* stoppableTransfer("cannot prepare the download", async () => {
      await fs.mkdir(dir, { recursive: true })
      for (const blob of blobs) {
        const chunks = blob.chunks ?? []
        if (blob.size === 0) {
          if (placeBytes?.(blob.hash, new Uint8Array(0)) === true) {
            delivered.add(blob.hash)
            continue
          }
          await fs.writeFile(path.join(dir, blob.hash), new Uint8Array(0))
          files.set(blob.hash, path.join(dir, blob.hash))
          continue
        }
        if (chunks.length === 0) throw new Error(`the server sent no chunk list for blob ${blob.hash}`)
        if (chunks.length > 1) {
          await fs.writeFile(partial(blob.hash), new Uint8Array(0))
          if (placeBytes !== undefined) hashing.set(blob.hash, { hasher: await Objects.Blake3.backend.makeHasher(), next: 0 })
        }
        remaining.set(blob.hash, chunks.length)
        for (const c of chunks) {
          const list = placements.get(c.hash) ?? []
          list.push({ blob: blob.hash, offset: c.offset })
          placements.set(c.hash, list)
          chunkSizes.set(c.hash, c.size)
        }
      }
    })
    const single = new Set(blobs.filter((b) => b.chunks?.length === 1 && b.chunks[0]!.hash === b.hash).map((b) => b.hash))
    const batches = planned?.batches ?? batchesOf(chunkSizes)
    const total = [...chunkSizes.values()].reduce((a, b) => a + b, 0)
    const largest = [...chunkSizes.values()].reduce((a, b) => Math.max(a, b), 1)
    const progress = makeProgress("Downloading", total)
    const writes = concurrentWrites()
    let requested = 0
    if (batches.length === 0) onRequested?.()

    const finishBlob = async (hash: string) => {
      const blob = blobs.find((b) => b.hash === hash)!
      const file = partial(hash)
      const got = await hashFile(file, blob.size)
      if (got !== hash) throw new Error(`blob ${hash} reassembled to ${got}: refusing corrupted content`)
      await fs.rename(file, path.join(dir, hash))
      files.set(hash, path.join(dir, hash))
    }

    /** A clone's part of a large blob, written at once (no pause for thread-pool writes) and hashed if in order, else read back. */
    const storePart = (data: Uint8Array, place: Placement): Promise<void> | undefined => {
      const fd = fsSync.openSync(partial(place.blob), "r+")
      try {
        for (let at = 0; at < data.length;) at += fsSync.writeSync(fd, data, at, data.length - at, place.offset + at)
      } finally {
        fsSync.closeSync(fd)
      }
      const order = hashing.get(place.blob)
      if (order?.next === place.offset) {
        order.hasher.update(data)
        order.next += data.length
      } else hashing.delete(place.blob)
      const left = (remaining.get(place.blob) ?? 1) - 1
      remaining.set(place.blob, left)
      if (left > 0) return undefined
      const whole = hashing.get(place.blob)
      if (whole === undefined || whole.next !== blobs.find((b) => b.hash === place.blob)!.size) return finishBlob(place.blob)
      const got = whole.hasher.digest()
      if (got !== place.blob) throw new Error(`blob ${place.blob} reassembled to ${got}: refusing corrupted content`)
      fsSync.renameSync(partial(place.blob), path.join(dir, place.blob))
      files.set(place.blob, path.join(dir, place.blob))
      return undefined
    }

    /** Writes a received chunk where `places` say: a whole blob into `dir`, a part of a large one at its offset. */
    const store = async (data: Uint8Array, places: ReadonlyArray<Placement>) => {
      for (const place of places) {
        if (single.has(place.blob)) {
          await writes.write(path.join(dir, place.blob), data)
          files.set(place.blob, path.join(dir, place.blob))
          continue
        }
        const handle = await fs.open(partial(place.blob), "r+")
        try {
          await handle.write(data, 0, data.length, place.offset)
        } finally {
          await handle.close()
        }
        const left = (remaining.get(place.blob) ?? 1) - 1
        remaining.set(place.blob, left)
        if (left === 0) await finishBlob(place.blob)
      }
    }

    yield* Effect.forEach(batches, (batch) =>
      stoppableTransfer("download failed", async (signal) => {
        const received = new Set<string>()
        /** The chunk's placements that still need a promise (a file in `dir`, a part of a large blob); none mostly. */
        const take = (hash: string, data: Uint8Array): Promise<void> | undefined => {
          const where = placements.get(hash)
          if (where === undefined || received.has(hash) || chunkSizes.get(hash) !== data.length) {
            throw strayChunk(hash, received.has(hash))
          }
          received.add(hash)
          progress.add(data.length)
          const rest = where.filter((place) => {
            if (!single.has(place.blob) || placeBytes?.(place.blob, data) !== true) return true
            delivered.add(place.blob)
            return false
          })
          if (rest.length === 0) return undefined
          if (placeBytes === undefined || rest.some((place) => single.has(place.blob))) return store(data, rest)
          const waits = rest.map((place) => storePart(data, place)).filter((wait) => wait !== undefined)
          return waits.length === 0 ? undefined : Promise.all(waits).then(() => undefined)
        }
        // Bare frames are taken as the answer arrives, synchronously (a chunk written straight into place costs no
        // promise; a raw one within a network read is a view of it), so verifying and writing overlap the transfer;
        // a chunk that needs a write of its own pauses the answer until it is written. Hashed frames (an older
        // server, GROVE_CHUNK_FRAMES=hashed) are read whole over node:http (no fetch to load).
        const queued: Array<Promise<void>> = []
        /** The writes of the last part taken: a try after a broken answer waits for them (and fails with them). */
        let writing: Promise<void> | undefined
        const hooks: FetchHooks = {
          signal,
          // The connection broke part-way: the chunks not taken yet, in order (a frame cut in half was dropped).
          resume: async () => {
            await writing
            const rest = batch.filter((hash) => !received.has(hash))
            return rest.length === 0 ? undefined : fetchRequest(remote, rest)
          },
          stream: (_status, headers) => {
            if (headers[Frames.HEADER] !== Frames.BARE_V1) return undefined
            const splitter = Frames.bareFrameSplitter((frame) => {
              // Verified by naming it from its plain bytes.
              const { hash, data } = ChunkCompression.namedBareFrame(frame, largest)
              const wait = take(hash, data)
              if (wait !== undefined) queued.push(wait)
            })
            return {
              part: (part) => {
                try {
                  splitter.push(part)
                } catch (error) {
                  // The request fails with this error; writes already started must not surface as unhandled.
                  for (const wait of queued.splice(0)) wait.catch(() => {})
                  throw error
                }
                if (queued.length === 0) return undefined
                writing = Promise.all(queued.splice(0)).then(() => undefined)
                return writing
              },
              done: splitter.end
            }
          }
        }
        const held = early?.claim(batch)
        const answering = held !== undefined ? held(hooks) : remote.sendBinary(FETCH_ROUTE, { ...(await fetchRequest(remote, batch)), ...hooks })
        if (++requested === Math.min(IN_FLIGHT, batches.length)) onRequested?.()
        const answer = await answering.catch(async (error: unknown) => {
          // An aborted or broken answer: the writes of its last part end before the batch does.
          await Promise.allSettled([writing, ...queued.splice(0)])
          throw error
        })
        // Without the header the server sent every chunk raw (it does not compress, or was not asked).
        const compressed = answer.headers[ChunkCompression.RESPONSE_HEADER] === ChunkCompression.ZSTD_V1
        if (answer.headers[Frames.HEADER] !== Frames.BARE_V1) {
          for await (const { hash, data } of checkedFrames(once(answer.body), compressed, chunkSizes)) await take(hash, data)
        }
        const lost = batch.filter((hash) => !received.has(hash))
        if (lost.length > 0) {
          throw new Error(`the server did not send ${lost.length} chunk(s), e.g. ${lost[0]} (missing, or not readable with this key)`)
        }
      }), { concurrency: IN_FLIGHT, discard: true }).pipe(
      Effect.andThen(transfer("cannot write a downloaded file", writes.drain)),
      // After a failure, no write may still be running when the caller removes the directory.
      Effect.ensuring(Effect.promise(writes.settle)),
      // Early requests no batch took (the plan differed) are stopped.
      Effect.ensuring(Effect.sync(() => early?.cancel())),
      Effect.ensuring(Effect.sync(progress.done))
    )
    for (const blob of blobs) {
      if (!files.has(blob.hash) && !delivered.has(blob.hash)) return yield* transfer("download failed", () => Promise.reject(new Error(`blob ${blob.hash} is incomplete`)))
    }
    return files
  })

/** A few blobs' bytes in memory (diff and merge of small text files). */
export const fetchBlobBytes = (
  remote: RemoteRepo,
  blobs: ReadonlyArray<IncomingBlob>,
  dir: string
): Effect.Effect<Map<string, Uint8Array>, CliFailure> =>
  Effect.gen(function*() {
    const files = yield* downloadBlobs(remote, blobs, dir)
    const out = new Map<string, Uint8Array>()
    for (const [hash, file] of files) {
      out.set(hash, yield* transfer("cannot read a downloaded blob", () => fs.readFile(file)))
      yield* transfer("cannot clean up", () => fs.rm(file, { force: true }))
    }
    return out
  })
