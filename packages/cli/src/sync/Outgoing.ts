/**
 * What a push sends, without Effect: the commits, trees and kept blobs of a branch's unpushed commits, how small
 * blobs go up (one hashed-frame batch, no `chunks/check`, when they are few), the push request, the state once the
 * server took it and the command's answer. The full push (commands/Push.ts, sync/Upload.ts) and the small push
 * (SmallPush.ts, which runs before the client loads) both build what they send here, so the two cannot drift.
 */
import type { ApiSync } from "@grove/api"
import { CHUNKING_THRESHOLD, MAX_BATCH_ENTRIES } from "@grove/core/objects/Chunks"
import { encodeFrames } from "@grove/core/objects/Frames"
import { closeSync, openSync, readSync } from "node:fs"
import type { TreeEntry } from "@grove/core/objects/TreeText"
import type { StoredCommit } from "../local/ObjectFiles.ts"
import { blobPath } from "../local/ObjectFiles.ts"
import type { BranchState, RepoState } from "../local/State.ts"
import { withBranch } from "../local/State.ts"
import { inBatches } from "./Batches.ts"

/** Why a push cannot be built from the checkout (a missing or damaged object): `code` is the command's error code. */
export class NotSendable extends Error {
  readonly code: string
  constructor(message: string, code: string) {
    super(message)
    this.code = code
  }
}

/** The checkout's objects as a push reads them, synchronously (trees and commits are small files). */
export interface ObjectReader {
  readonly root: string
  readonly readCommit: (hash: string) => StoredCommit | undefined
  /** A stored commit's manifest hash without the rest of it (ObjectFiles.readCommitManifest); else from readCommit. */
  readonly readManifest?: ((hash: string) => string | undefined) | undefined
  /** Undefined when the tree is not here; throws when it is damaged. */
  readonly readTree: (hash: string) => ReadonlyArray<TreeEntry> | undefined
  /** The size of the blob's kept copy (Objects.ts keeps the blobs of local commits), undefined when none is kept. */
  readonly keptBlobSize: (hash: string) => number | undefined
}

/** A blob to offer: its bytes are in `file`. */
export interface OutgoingBlob {
  readonly hash: string
  readonly size: number
  readonly file: string
}

export const branchRecord = (branch: BranchState): ApiSync.BranchData => ({
  name: branch.name,
  description: branch.description,
  parent_branch: branch.parent_branch,
  status: branch.status,
  created_at: branch.created_at
})

/** Nothing to send: no local commit and no pending branch metadata, on a branch the server has. */
export const nothingToPush = (branch: BranchState): boolean =>
  branch.unpushed.length === 0 && branch.remote_head !== null && branch.head === branch.remote_head &&
  branch.description_pending !== true && branch.close_pending !== true

/**
 * The trees a push of `commits` must carry: every tree of each commit that is not, at the same
 * path, a tree of one of its parents. A parent is either in the same push (its trees are sent too)
 * or published on the server (which then holds all of its trees), so whatever is left out the
 * server has. This walks only the directories that changed, and it does not trust the local
 * bookkeeping of which trees were "new" at commit time: that says nothing about what the server
 * has (a commit interrupted after its trees were written, or a tree first written for another
 * branch, is recorded as introducing none). A parent whose trees are not here counts as empty,
 * which only sends more.
 */
export const treesToSend = (reader: ObjectReader, commits: ReadonlyArray<ApiSync.CommitData>): Array<ApiSync.TreeData> => {
  const out = new Map<string, ReadonlyArray<TreeEntry>>()
  const manifests = new Map(commits.map((c) => [c.hash, c.manifest_hash]))
  const manifestOf = (hash: string) =>
    manifests.get(hash) ?? (reader.readManifest === undefined ? reader.readCommit(hash)?.commit.manifest_hash : reader.readManifest(hash))
  const walk = (hash: string, bases: ReadonlyArray<string>): void => {
    if (bases.includes(hash) || out.has(hash)) return
    const entries = reader.readTree(hash)
    if (entries === undefined) throw new NotSendable(`tree ${hash} is missing from .grove/objects`, "missing_object")
    out.set(hash, entries)
    const baseEntries: Array<ReadonlyArray<TreeEntry>> = []
    for (const base of bases) {
      const read = reader.readTree(base)
      if (read !== undefined) baseEntries.push(read)
    }
    for (const entry of entries) {
      if (entry.kind !== "tree") continue
      walk(entry.hash, baseEntries.flatMap((b) => b.filter((e) => e.kind === "tree" && e.name === entry.name).map((e) => e.hash)))
    }
  }
  for (const commit of commits) {
    const bases: Array<string> = []
    for (const parent of [commit.parent_hash, commit.merge_parent_hash]) {
      if (parent == null) continue
      const manifest = manifestOf(parent)
      if (manifest !== undefined) bases.push(manifest)
    }
    walk(commit.manifest_hash, bases)
  }
  return [...out].map(([hash, entries]): ApiSync.TreeData => ({ hash, entries }))
}

/** The commits, trees and kept blobs a push of `branch` sends. */
export const outgoing = (reader: ObjectReader, branch: BranchState) => {
  const commits: Array<ApiSync.CommitData> = []
  const blobs: Array<OutgoingBlob> = []
  const seen = new Set<string>()
  for (const hash of branch.unpushed) {
    const stored = reader.readCommit(hash)
    if (stored === undefined) throw new NotSendable(`local commit ${hash} is missing from .grove/objects`, "missing_object")
    commits.push(stored.commit)
    for (const change of stored.commit.files) {
      const blob = change.new_blob_hash
      if (blob == null || seen.has(blob)) continue
      const size = reader.keptBlobSize(blob)
      if (size === undefined) continue
      seen.add(blob)
      blobs.push({ hash: blob, size, file: blobPath(reader.root, blob) })
    }
  }
  return { commits, trees: treesToSend(reader, commits), blobs }
}

/** The push's request body (`POST /api/{owner}/{name}/push`). */
export const pushRequest = (
  expected: string | null,
  branch: BranchState,
  commits: ReadonlyArray<ApiSync.CommitData>,
  blobs: ReadonlyArray<ApiSync.BlobData>,
  trees: ReadonlyArray<ApiSync.TreeData>
) => ({ expected_head: expected, force: false, branch: branchRecord(branch), commits: [...commits], blobs: [...blobs], trees: [...trees] })

/** The 64-hex hashes a push's JSON holds at least: one per file change and per tree entry. */
export const hashesIn = (commits: ReadonlyArray<ApiSync.CommitData>, trees: ReadonlyArray<ApiSync.TreeData>): number =>
  commits.reduce((n, c) => n + c.files.length, 0) + trees.reduce((n, t) => n + t.entries.length, 0)

// ---- uploads ----

export const BATCH_ENTRIES = MAX_BATCH_ENTRIES
export const BATCH_BYTES = 16 * 1024 * 1024
/** Below this many bytes to send, chunk compression is not worth the extra `capabilities` round trip. */
export const COMPRESS_CHUNKS_FROM = 256 * 1024
/**
 * Up to this many bytes of small blobs (and no large one) go to chunks/batch without chunks/check: a one-file push
 * is 2 requests (the batch, the push), not 3.
 */
export const SEND_UNASKED_UP_TO = 64 * 1024
/** The content type of hashed frames (`Frames.encodeFrames`). */
export const HASHED_FRAMES_TYPE = "application/octet-stream"

/** Each blob once. */
export const uniqueBlobs = (blobs: ReadonlyArray<OutgoingBlob>): Array<OutgoingBlob> => [...new Map(blobs.map((b) => [b.hash, b])).values()]

/** Cut into FastCDC chunks (and asked about with blobs/check) from this size; below it a blob is its own one chunk. */
export const isLarge = (blob: { readonly size: number }): boolean => blob.size >= CHUNKING_THRESHOLD

/** A piece of a file that travels as one chunk. */
export interface ChunkSource {
  readonly hash: string
  readonly file: string
  readonly offset: number
  readonly size: number
}

/** A small blob's one chunk: the whole file, under the blob's hash. */
export const wholeChunk = (blob: OutgoingBlob): ChunkSource => ({ hash: blob.hash, file: blob.file, offset: 0, size: blob.size })

/**
 * Whether `chunks` go without asking (chunks/check): the round trip costs more than their bytes, and the batch is
 * the same request either way (the server stores a chunk it had once, and counts it as uploaded by the caller).
 */
export const sendsUnasked = (anyLarge: boolean, chunks: ReadonlyArray<ChunkSource>): boolean =>
  !anyLarge && chunks.reduce((sum, c) => sum + c.size, 0) <= SEND_UNASKED_UP_TO

/** Ranges under this many bytes are read with synchronous calls: three thread-pool trips cost more than the read. */
export const READ_SYNC_BELOW = 256 * 1024

export const shorter = (file: string) => new Error(`${file} is shorter than expected`)

/** A chunk's bytes, into `data` when given (its size). */
export const readRangeSync = (source: ChunkSource, data: Uint8Array = new Uint8Array(source.size)): Uint8Array => {
  const fd = openSync(source.file, "r")
  try {
    let read = 0
    while (read < source.size) {
      const bytesRead = readSync(fd, data, read, source.size - read, source.offset + read)
      if (bytesRead === 0) throw shorter(source.file)
      read += bytesRead
    }
    return data
  } finally {
    closeSync(fd)
  }
}

/** The batches `chunks` go in: at most BATCH_ENTRIES chunks and BATCH_BYTES (or one chunk) each. */
export const batchesOf = (chunks: ReadonlyArray<ChunkSource>): Array<Array<ChunkSource>> =>
  inBatches(chunks, (chunk) => chunk.size, BATCH_ENTRIES, BATCH_BYTES)

/** A batch of hashed frames (each chunk's hash, then its bytes as sent), the body of `chunks/batch`. */
export const hashedBatch = (frames: ReadonlyArray<{ readonly hash: string; readonly data: Uint8Array }>): Buffer =>
  Buffer.concat(encodeFrames(frames))

// ---- after the push ----

/** The state once the server took the push of `branch` up to `tip`. */
export const pushedState = (state: RepoState, branch: BranchState, tip: string): RepoState =>
  withBranch(state, { ...branch, remote_head: tip, unpushed: [], description_pending: false, close_pending: false })

/** The kept blobs some branch's unpushed commits still need (the pushed ones' copies can go). */
export const blobsStillNeeded = (state: RepoState, readCommit: (hash: string) => StoredCommit | undefined): Set<string> => {
  const needed = new Set<string>()
  for (const other of Object.values(state.branches)) {
    for (const hash of other.unpushed) {
      for (const file of readCommit(hash)?.commit.files ?? []) if (file.new_blob_hash != null) needed.add(file.new_blob_hash)
    }
  }
  return needed
}

export interface PushSummary {
  readonly branch: string
  readonly head: string | null
  readonly pushed: number
  readonly uploadedChunks: number
  readonly uploadedBytes: number
  readonly sentBytes: number
  readonly createdRepository: boolean
}

/** What `grove push` answers: the JSON document, and the line a person reads. */
export const pushAnswer = (s: PushSummary) => ({
  value: {
    branch: s.branch,
    head: s.head,
    pushed_commits: s.pushed,
    uploaded_chunks: s.uploadedChunks,
    uploaded_bytes: s.uploadedBytes,
    sent_bytes: s.sentBytes,
    created_repository: s.createdRepository
  },
  human: (): string =>
    s.pushed === 0
      ? `Already up to date (${s.branch}).`
      : `${s.createdRepository ? "Created the repository. " : ""}Pushed ${s.pushed} commit(s) to ${s.branch} (head ${s.head?.slice(0, 12)}; ${s.uploadedChunks} chunk(s), ${s.uploadedBytes} bytes uploaded).`
})
