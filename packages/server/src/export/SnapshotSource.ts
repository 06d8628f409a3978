/**
 * What the zip and git exports read: Grove trees and blobs by hash, and main's history. The
 * server backs it with the database and object storage; tests use MemorySnapshotSource.
 */
import type { Effect, Stream } from "effect"
import type { TreeEntry } from "@grove/core/objects/Tree"

export interface SnapshotSource<E> {
  readonly readTree: (hash: string) => Effect.Effect<ReadonlyArray<TreeEntry>, E>
  /** The blob's bytes, in chunks of any size; the exporters never hold a whole blob. */
  readonly readBlob: (hash: string) => Stream.Stream<Uint8Array, E>
  readonly blobSize: (hash: string) => Effect.Effect<number, E>
}

/** One squash commit on main. `history` arguments list these oldest first, each the parent of the next. */
export interface CommitRecord {
  readonly hash: string
  readonly parent_hash: string | null
  readonly manifest_hash: string
  readonly author: string
  readonly message: string | null
  /** RFC 3339, e.g. `2026-06-24T00:00:00+00:00`, fraction optional. */
  readonly timestamp: string
}
