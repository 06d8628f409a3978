/**
 * Chunks a caller sent (chunk uploads, a push's inline blobs): stored, then granted to the caller.
 * ChunkStore does not rewrite a chunk the organization has, so a chunk gc's sweep is deleting at that
 * moment would otherwise be answered as uploaded and then be gone. The grant's statement locks the
 * marked chunk rows (ContentObjects.recordChunkUploads): a row the sweep deleted first is found missing there,
 * and the chunk is stored again; a sweep that comes later sees the grant (housekeeping/Gc.ts).
 */
import { ObjectStore } from "@grove/storage"
import { Effect } from "effect"
import { ChunkStore, type UploadedChunk } from "./ChunkStore.ts"
import { ContentObjects, type Uploader } from "./ContentObjects.ts"

/**
 * A chunk stored again is new (younger than any mark), so no sweep takes it: a second round is the
 * last one needed; a third would mean the store lost what it just wrote.
 */
const ROUNDS = 3

export const storeUploaded = Effect.fnUntraced(function*(
  orgId: string,
  scope: Uploader,
  entries: ReadonlyArray<UploadedChunk>
) {
  const chunks = yield* ChunkStore
  const objects = yield* ContentObjects
  let pending = entries
  for (let round = 1; pending.length > 0; round++) {
    if (round > ROUNDS) {
      return yield* new ObjectStore.ObjectStoreError({
        operation: "put",
        reason: "Backend",
        message: `chunks ${pending.map((e) => e.hash).slice(0, 3).join(", ")} vanished right after being stored`
      })
    }
    // The new chunks' rows go in the grant's statement: one round trip after the bytes, not two.
    const rows = yield* chunks.storeBytes(orgId, pending)
    const gone = yield* objects.recordChunkUploads(scope, orgId, pending.map((e) => e.hash), rows)
    if (gone.size > 0) yield* Effect.logInfo(`${gone.size} uploaded chunks were swept by gc meanwhile: stored again`)
    pending = pending.filter((e) => gone.has(e.hash))
  }
})
