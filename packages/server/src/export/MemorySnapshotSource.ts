/** A SnapshotSource over objects held in memory, for tests of the exporters and of their routes. */
import { Data, Effect, Stream } from "effect"
import { hash } from "@grove/core/objects/Blake3"
import { hashTree } from "@grove/core/objects/Tree"
import type { BlobMode, TreeEntry } from "@grove/core/objects/Tree"
import type { SnapshotSource } from "./SnapshotSource.ts"

export type MemoryNode =
  | { readonly file: Uint8Array | string; readonly mode?: BlobMode }
  | { readonly dir: Readonly<Record<string, MemoryNode>> }

export class MissingObject extends Data.TaggedError("MissingObject")<{ readonly message: string }> {}

export class MemorySnapshotSource implements SnapshotSource<MissingObject> {
  readonly trees = new Map<string, ReadonlyArray<TreeEntry>>()
  readonly blobs = new Map<string, Uint8Array>()
  /** Size of the chunks readBlob emits. */
  readonly chunkSize: number

  constructor(chunkSize = 64 * 1024) {
    this.chunkSize = chunkSize
  }

  addBlob(content: Uint8Array | string): string {
    const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content
    const h = hash(bytes)
    this.blobs.set(h, bytes)
    return h
  }

  /** Stores a directory and everything under it; returns its tree hash. */
  addTree(entries: Readonly<Record<string, MemoryNode>>): string {
    const tree: Array<TreeEntry> = Object.entries(entries).map(([name, node]) =>
      "dir" in node
        ? { name, kind: "tree", hash: this.addTree(node.dir), mode: "tree" }
        : { name, kind: "blob", hash: this.addBlob(node.file), mode: node.mode ?? "regular" }
    )
    const h = hashTree(tree)
    this.trees.set(h, tree)
    return h
  }

  readonly readTree = (h: string): Effect.Effect<ReadonlyArray<TreeEntry>, MissingObject> =>
    Effect.suspend(() => {
      const tree = this.trees.get(h)
      return tree === undefined ? Effect.fail(new MissingObject({ message: `no tree ${h}` })) : Effect.succeed(tree)
    })

  readonly readBlob = (h: string): Stream.Stream<Uint8Array, MissingObject> =>
    Stream.suspend(() => {
      const blob = this.blobs.get(h)
      if (blob === undefined) return Stream.fail(new MissingObject({ message: `no blob ${h}` }))
      const size = this.chunkSize
      return Stream.fromIterable((function*() {
        for (let at = 0; at < blob.length; at += size) yield blob.subarray(at, at + size)
      })(), { chunkSize: 1 }) // one read at a time, as a real store delivers them
    })

  readonly blobSize = (h: string): Effect.Effect<number, MissingObject> =>
    Effect.suspend(() => {
      const blob = this.blobs.get(h)
      return blob === undefined ? Effect.fail(new MissingObject({ message: `no blob ${h}` })) : Effect.succeed(blob.length)
    })
}
