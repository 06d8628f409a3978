/**
 * Building real protocol objects in tests: snapshots -> canonical trees, commits with correct
 * hashes and file lists, blobs inline or as uploaded chunks, frames for chunks/batch.
 */
import * as FastCdc from "@grove/core/chunking/FastCdc"
import * as Snapshots from "@grove/core/merge/Snapshots"
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Commit from "@grove/core/objects/Commit"
import type * as FileChanges from "@grove/core/objects/FileChanges"
import * as Frames from "@grove/core/objects/Frames"
import * as Timestamp from "@grove/core/objects/Timestamp"
import type * as Tree from "@grove/core/objects/Tree"

export interface FileSpec {
  readonly content: string | Uint8Array
  readonly mode?: Tree.BlobMode
}

export type Files = Record<string, string | Uint8Array | FileSpec>

export interface Built {
  readonly commit: {
    hash: string
    branch_name: string
    parent_hash: string | null
    merge_parent_hash?: string
    manifest_hash: string
    author: string
    message?: string
    timestamp: string
    files: Array<FileChanges.FileChange>
  }
  readonly trees: Array<{ hash: string; entries: ReadonlyArray<Tree.TreeEntry> }>
  /** Every file's bytes by blob hash. */
  readonly contents: Map<string, Uint8Array>
  readonly snapshot: FileChanges.Snapshot
}

const bytesOf = (c: string | Uint8Array) => typeof c === "string" ? new TextEncoder().encode(c) : c

let clock = 1_780_000_000_000n * 1_000_000n

export const snapshotOf = (files: Files) => {
  const snapshot = new Map<string, { hash: string; mode: Tree.BlobMode }>()
  const contents = new Map<string, Uint8Array>()
  for (const [path, spec] of Object.entries(files)) {
    const s: FileSpec = typeof spec === "string" || spec instanceof Uint8Array ? { content: spec } : spec
    const bytes = bytesOf(s.content)
    const hash = Blake3.hash(bytes)
    snapshot.set(path, { hash, mode: s.mode ?? "regular" })
    contents.set(hash, bytes)
  }
  return { snapshot, contents }
}

/** A commit of `files` on `branch` after `parent` (its snapshot gives the file changes). */
export const buildCommit = (options: {
  readonly branch: string
  readonly files: Files
  readonly parent?: Built | null
  readonly parentHash?: string | null
  readonly parentSnapshot?: FileChanges.Snapshot
  readonly mergeParent?: string
  readonly author?: string
  readonly message?: string
}): Built => {
  const { snapshot, contents } = snapshotOf(options.files)
  const built = Snapshots.buildTrees(snapshot)
  if (!built.ok) throw new Error(built.reason)
  const before = options.parent?.snapshot ?? options.parentSnapshot ?? new Map()
  clock += 1_000_000_000n
  const fields = {
    branch_name: options.branch,
    parent_hash: options.parent?.commit.hash ?? options.parentHash ?? null,
    merge_parent_hash: options.mergeParent ?? null,
    manifest_hash: built.root,
    author: options.author ?? "tester",
    message: options.message ?? null,
    timestamp: clock
  }
  const hash = Commit.hashCommit(fields)
  return {
    commit: {
      hash,
      branch_name: fields.branch_name,
      parent_hash: fields.parent_hash,
      ...(options.mergeParent === undefined ? {} : { merge_parent_hash: options.mergeParent }),
      manifest_hash: built.root,
      author: fields.author,
      ...(options.message === undefined ? {} : { message: options.message }),
      timestamp: Timestamp.formatTimestamp(clock),
      files: TreeDiff.diffSnapshots(before, snapshot)
    },
    trees: [...built.trees].map(([h, entries]) => ({ hash: h, entries })),
    contents,
    snapshot
  }
}

/** Blobs as inline content (the Oak client's way for small files). */
export const inlineBlobs = (built: Built, only?: ReadonlySet<string>) =>
  [...built.contents].filter(([h]) => only === undefined || only.has(h)).map(([hash, bytes]) => ({
    hash,
    content: Array.from(bytes),
    size: bytes.length
  }))

/** Chunk refs for a blob, as a client computes them (FastCDC from 10 MiB). */
export const chunkRefs = (bytes: Uint8Array) => {
  if (bytes.length < FastCdc.CHUNKING_THRESHOLD) {
    return [{ hash: Blake3.hash(bytes), offset: 0, size: bytes.length, data: bytes }]
  }
  return FastCdc.boundaries(bytes).map((b) => {
    const data = bytes.subarray(b.offset, b.offset + b.length)
    return { hash: Blake3.hash(data), offset: b.offset, size: b.length, data }
  })
}

export const batchBody = (chunks: ReadonlyArray<{ hash: string; data: Uint8Array }>): Uint8Array =>
  new Uint8Array(Buffer.concat(Frames.encodeFrames(chunks)))

/** Frames of a chunks/fetch response. */
export const decodeBatch = async (body: Uint8Array) => {
  const out: Array<{ hash: string; data: Uint8Array }> = []
  const source = (async function*() {
    yield body
  })()
  for await (const frame of Frames.decodeFrames(source)) out.push(frame)
  return out
}

export const pushBody = (options: {
  readonly branch: string
  readonly commits: ReadonlyArray<Built>
  readonly blobs?: ReadonlyArray<{ readonly hash: string; readonly content: ReadonlyArray<number>; readonly size: number; readonly chunks?: ReadonlyArray<unknown> }>
  readonly expectedHead?: string | null
  readonly force?: boolean
  readonly description?: string | null
  readonly status?: "open" | "closed"
  readonly closeReason?: string
}) => ({
  expected_head: options.expectedHead ?? null,
  expected_branch_head: null,
  force: options.force ?? false,
  branch: {
    name: options.branch,
    description: options.description ?? null,
    parent_branch: "main",
    status: options.status ?? "open",
    created_at: "2026-11-22T10:00:00.123456789+00:00",
    ...(options.closeReason === undefined ? {} : { close_reason: options.closeReason })
  },
  commits: options.commits.map((c) => c.commit),
  blobs: options.blobs ?? options.commits.flatMap((c) => inlineBlobs(c)),
  trees: options.commits.flatMap((c) => c.trees)
})

/** Deterministic, incompressible bytes (xorshift32). */
export const noise = (size: number, seed: number): Buffer => {
  const out = Buffer.alloc(size)
  let x = seed >>> 0 || 1
  for (let i = 0; i + 4 <= size; i += 4) {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    out.writeUInt32LE(x, i)
  }
  return out
}
