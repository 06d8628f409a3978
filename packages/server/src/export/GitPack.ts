/**
 * Main's history as a version-2 git packfile: every object whole (no deltas), zlib-deflated,
 * written to a file as it is produced. Blobs stream through (their pack header needs the size,
 * which blobSize gives up front); Grove trees and blobs map to git ids once per build, so
 * subtrees shared between commits are written once. The object count in the pack header is only
 * known at the end, so the header is patched and the trailing SHA-1 computed by re-reading the
 * file: one sequential read instead of a second pass over the source.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as zlib from "node:zlib"
import { Effect, Stream } from "effect"
import { checkedSize, deflate, DEFLATE_LEVEL, readSmall, SMALL_BLOB, withFirstChunk, worthDeflating } from "./ByteStreams.ts"
import { ExportError, exportError } from "./ExportError.ts"
import { encodeCommit, encodeTree, objectHeader, objectId, packObjectHeader } from "./GitObjects.ts"
import type { GitObjectType, GitTreeEntry } from "./GitObjects.ts"
import type { CommitRecord, SnapshotSource } from "./SnapshotSource.ts"

export interface GitPackResult {
  readonly packPath: string
  /** Git id of the newest commit, null for an empty history (the pack then holds no objects). */
  readonly headSha: string | null
  readonly objectCount: number
}

const WRITE_BUFFER = 1024 * 1024

/** Appends to a file through a buffer, so small objects do not each cost a write. */
class PackFile {
  private readonly buffer = Buffer.allocUnsafe(WRITE_BUFFER)
  private used = 0
  private readonly handle: fs.promises.FileHandle
  constructor(handle: fs.promises.FileHandle) {
    this.handle = handle
  }

  write(chunk: Uint8Array): Effect.Effect<void, ExportError> {
    if (this.used + chunk.length <= WRITE_BUFFER) {
      this.buffer.set(chunk, this.used)
      this.used += chunk.length
      return Effect.void
    }
    return Effect.andThen(this.flush(), () => chunk.length < WRITE_BUFFER ? this.write(chunk) : this.raw(chunk))
  }

  flush(): Effect.Effect<void, ExportError> {
    if (this.used === 0) return Effect.void
    const pending = this.buffer.subarray(0, this.used)
    return Effect.map(this.raw(pending), () => {
      this.used = 0
    })
  }

  private raw(bytes: Uint8Array): Effect.Effect<void, ExportError> {
    return Effect.tryPromise({
      try: async () => {
        for (let at = 0; at < bytes.length;) {
          const { bytesWritten } = await this.handle.write(bytes, at, bytes.length - at, null)
          at += bytesWritten
        }
      },
      catch: exportError("writing the pack failed")
    })
  }

  /** Writes the real object count into the header, then appends the SHA-1 of everything before it. */
  seal(count: number): Effect.Effect<void, ExportError> {
    return Effect.andThen(this.flush(), () =>
      Effect.tryPromise({
        try: async () => {
          const header = Buffer.alloc(12)
          header.write("PACK", 0, "latin1")
          header.writeUInt32BE(2, 4)
          header.writeUInt32BE(count, 8)
          await this.handle.write(header, 0, 12, 0)
          const sha = createHash("sha1")
          for await (const chunk of this.handle.createReadStream({ start: 0, autoClose: false, highWaterMark: WRITE_BUFFER })) {
            sha.update(chunk as Buffer)
          }
          const { size } = await this.handle.stat()
          await this.handle.write(sha.digest(), 0, 20, size)
          await this.handle.sync()
        },
        catch: exportError("sealing the pack failed")
      }))
  }
}

/** Builds the pack of `history` (oldest first, each commit the parent of the next) at `packPath`. */
export const buildPack = <E>(
  source: SnapshotSource<E>,
  history: ReadonlyArray<CommitRecord>,
  packPath: string
): Effect.Effect<GitPackResult, E | ExportError> =>
  Effect.gen(function*() {
    for (let i = 1; i < history.length; i++) {
      if (history[i]?.parent_hash !== history[i - 1]?.hash) {
        return yield* new ExportError({ message: `history is not a first-parent chain at commit ${history[i]?.hash}` })
      }
    }
    const handle = yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => fs.promises.open(packPath, "w+"), catch: exportError(`cannot create ${packPath}`) }),
      (h) => Effect.promise(() => h.close().catch(() => undefined))
    )
    const file = new PackFile(handle)
    yield* file.write(new Uint8Array(12)) // header, patched by seal
    const trees = new Map<string, string>()
    const blobs = new Map<string, string>()
    let count = 0

    const writeWhole = (type: GitObjectType, body: Uint8Array, level: number) =>
      Effect.gen(function*() {
        yield* file.write(packObjectHeader(type, body.length))
        yield* file.write(zlib.deflateSync(body, { level }))
        count++
        return objectId(type, body)
      })

    const blobSha = (hash: string, path: string): Effect.Effect<string, E | ExportError> =>
      Effect.gen(function*() {
        const known = blobs.get(hash)
        if (known !== undefined) return known
        const size = yield* source.blobSize(hash)
        const what = `blob ${hash} (${path})`
        let sha: string
        if (size <= SMALL_BLOB) {
          const body = yield* readSmall(source.readBlob(hash), size, what)
          sha = yield* writeWhole("blob", body, worthDeflating(body) ? DEFLATE_LEVEL : 0)
        } else {
          const hasher = createHash("sha1").update(objectHeader("blob", size))
          yield* file.write(packObjectHeader("blob", size))
          const packed = withFirstChunk(source.readBlob(hash), (first, whole) =>
            deflate(checkedSize(whole, size, (chunk) => hasher.update(chunk), what), {
              raw: false,
              level: worthDeflating(first) ? DEFLATE_LEVEL : 0
            }))
          yield* Stream.runForEach(packed, (chunk) => file.write(chunk))
          count++
          sha = hasher.digest("hex")
        }
        blobs.set(hash, sha)
        return sha
      })

    const treeSha = (hash: string, path: string): Effect.Effect<string, E | ExportError> =>
      Effect.gen(function*() {
        const known = trees.get(hash)
        if (known !== undefined) return known
        const entries = yield* source.readTree(hash)
        const gitEntries: Array<GitTreeEntry> = []
        for (const entry of entries) {
          const childPath = `${path}${entry.name}`
          const sha = entry.kind === "tree"
            ? yield* treeSha(entry.hash, `${childPath}/`)
            : yield* blobSha(entry.hash, childPath)
          gitEntries.push({ name: entry.name, mode: entry.mode, sha })
        }
        const sha = yield* writeWhole("tree", encodeTree(gitEntries), DEFLATE_LEVEL)
        trees.set(hash, sha)
        return sha
      })

    let parent: string | null = null
    for (const commit of history) {
      const tree = yield* treeSha(commit.manifest_hash, "")
      const body = encodeCommit({ tree, parent, author: commit.author, timestamp: commit.timestamp, message: commit.message })
      parent = yield* writeWhole("commit", body, DEFLATE_LEVEL)
    }
    yield* file.seal(count)
    return { packPath, headSha: parent, objectCount: count }
  }).pipe(Effect.scoped, Effect.withSpan("GitPack.buildPack"))
