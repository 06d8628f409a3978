/**
 * The exports' view of stored content (export/SnapshotSource): trees from the
 * database, blob bytes streamed chunk by chunk from the object store, and
 * main's first-parent history.
 */
import { Data, Effect, Stream } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { CommitRecord, SnapshotSource } from "../export/SnapshotSource.ts"
import type { ChunkStore } from "./ChunkStore.ts"
import { readChunks } from "./ChunkReads.ts"
import type { ContentObjects } from "./ContentObjects.ts"
import type { History } from "./History.ts"

/** Published content refers to an object that is not stored: data loss, not a caller error. */
export class StoredObjectMissing extends Data.TaggedError("StoredObjectMissing")<{ readonly message: string }> {}

export type StoredSnapshotError = SqlError | StoredObjectMissing | { readonly _tag: "ObjectStoreError" } | { readonly _tag: "ObjectNotFound" }

export const storedSnapshot = (
  orgId: string,
  objects: ContentObjects["Service"],
  chunks: ChunkStore["Service"]
): SnapshotSource<StoredSnapshotError> => ({
  readTree: (hash) =>
    objects.loadTrees(orgId, [hash]).pipe(
      Effect.flatMap((found) => {
        const entries = found.get(hash)
        return entries === undefined ? Effect.fail(new StoredObjectMissing({ message: `tree ${hash} is not stored` })) : Effect.succeed(entries)
      })
    ),
  readBlob: (hash) =>
    Stream.unwrap(objects.blobInfo(orgId, [hash]).pipe(Effect.flatMap((found) => {
      const blob = found.get(hash)
      if (blob === undefined) return Effect.fail(new StoredObjectMissing({ message: `blob ${hash} is not stored` }))
      return Effect.succeed(readChunks(chunks, orgId, blob.chunks))
    }))),
  blobSize: (hash) =>
    objects.blobSizes(orgId, [hash]).pipe(Effect.flatMap((sizes) => {
      const size = sizes.get(hash)
      return size === undefined ? Effect.fail(new StoredObjectMissing({ message: `blob ${hash} is not stored` })) : Effect.succeed(size)
    }))
})

/** Main's squash commits, oldest first, each the parent of the next. */
export const mainHistory = (history: History["Service"], repoId: string, head: string) =>
  history.firstParentChain(repoId, head, 1_000_000).pipe(
    Effect.map((chain): Array<CommitRecord> =>
      chain.reverse().map((c) => ({
        hash: c.hash,
        parent_hash: c.parent_hash,
        manifest_hash: c.manifest_hash,
        author: c.author,
        message: c.message,
        timestamp: c.timestamp
      }))
    )
  )
