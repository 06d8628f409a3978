/**
 * Reading many chunks as a stream: a blob's chunks in order, or a fetch's list in request order, in bounded groups
 * (small chunks of one pack in one range read), so memory stays bounded whatever the total.
 */
import { Effect, Stream } from "effect"
import type { ChunkLocation, ChunkReadError, ChunkStore } from "./ChunkStore.ts"

/** The bytes of a blob (or of any chunk list), chunk after chunk, in order: located in one query, then read one by one. */
export const readChunks = (
  store: ChunkStore["Service"],
  orgId: string,
  chunks: ReadonlyArray<{ readonly hash: string }>
): Stream.Stream<Uint8Array, ChunkReadError> =>
  Stream.unwrap(store.locate(orgId, chunks.map((c) => c.hash)).pipe(Effect.map((located) =>
    Stream.fromIterable(chunks).pipe(Stream.flatMap((c) => {
      const location = located.get(c.hash)
      // Not located: `read` lets the object store answer (ObjectNotFound when it lacks it too).
      return location === undefined ? store.read(orgId, c.hash) : store.readAt(orgId, location)
    }))
  )))

/** Bytes of chunks read per round trip when streaming many (a chunk larger than this is read alone). */
export const READ_GROUP_BYTES = 2 * 1024 * 1024

/**
 * The chunks of `hashes` in request order, read a group of at most READ_GROUP_BYTES at a time (small
 * ones of a pack in one range read), so memory stays bounded whatever the total. Hashes without a
 * location in `located` (not stored) are skipped.
 */
export const readInOrder = (
  store: ChunkStore["Service"],
  orgId: string,
  hashes: ReadonlyArray<string>,
  located: ReadonlyMap<string, ChunkLocation>
): Stream.Stream<{ readonly hash: string; readonly data: Uint8Array }, ChunkReadError> => {
  const groups: Array<Array<ChunkLocation>> = [[]]
  let bytes = 0
  for (const hash of hashes) {
    const location = located.get(hash)
    if (location === undefined) continue
    if (bytes + location.size > READ_GROUP_BYTES && groups.at(-1)!.length > 0) {
      groups.push([])
      bytes = 0
    }
    groups.at(-1)!.push(location)
    bytes += location.size
  }
  return Stream.fromIterable(groups).pipe(
    Stream.mapEffect((group) =>
      store.readLocated(orgId, group).pipe(Effect.map((found) =>
        group.flatMap(({ hash }) => {
          const data = found.get(hash)
          return data === undefined ? [] : [{ hash, data }]
        })
      ))
    ),
    Stream.flatMap((found) => Stream.fromIterable(found))
  )
}
