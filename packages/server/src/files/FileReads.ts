/**
 * Reads of a directory or a file at a commit (or a branch's head) for one caller, with path
 * permissions applied exactly as the API's `tree/` and `raw/` routes apply them: a withheld file is
 * left out of a listing and answers "not found" when asked for. The web pages read through these.
 */
import { ApiErrors, type Caller } from "@grove/api"
import { Effect, Stream } from "effect"
import type { RepositoryRef } from "../path-permissions/PathPermissions.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { readChunks, readInOrder } from "../content/ChunkReads.ts"
import { CommitPaths, pathSegments } from "../content/CommitPaths.ts"
import type { CommitHeader } from "../content/CommitHeaders.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { callerPolicy } from "../path-permissions/CallerPolicy.ts"

export interface DirectoryEntry {
  readonly name: string
  readonly path: string
  readonly kind: "tree" | "blob"
  readonly mode: string
  readonly hash: string
  readonly size?: number
}

export interface Directory {
  readonly kind: "tree"
  readonly commit: CommitHeader
  readonly path: string
  /** The directory's own tree hash. */
  readonly hash: string
  readonly entries: ReadonlyArray<DirectoryEntry>
}

export interface FileAt {
  readonly kind: "blob"
  readonly commit: CommitHeader
  readonly path: string
  readonly hash: string
  readonly mode: string
  readonly size: number
  readonly chunks: ReadonlyArray<{ readonly hash: string; readonly offset: number; readonly size: number }>
}

const notFound = (path: string) => new ApiErrors.NotFound({ error: `no such path '${path.slice(0, 200)}'`, code: "path_not_found" })

/** What is at `path` in `ref` for this caller: a directory listing, or a file; NotFound for a withheld one. */
export const pathAt = Effect.fnUntraced(function*(caller: Caller, repo: RepositoryRef, ref: string, path: string) {
  const paths = yield* CommitPaths
  const objects = yield* ContentObjects
  const segments = pathSegments(path)
  if (!segments.ok) return yield* new ApiErrors.BadRequest({ error: segments.reason, code: "invalid_path" })
  const commit = yield* dbUnavailable(paths.resolveCommit(repo.id, ref))
  if (commit === undefined) return yield* new ApiErrors.NotFound({ error: `commit '${ref.slice(0, 100)}' not found`, code: "commit_not_found" })
  const target = yield* dbUnavailable(paths.resolvePath(repo.orgId, commit.manifest_hash, segments.segments))
  const policy = yield* callerPolicy(caller, repo)
  const prefix = segments.segments.join("/")
  if (target === undefined || (target.kind === "blob" && !policy.canRead(prefix))) return yield* notFound(path)
  if (target.kind === "blob") {
    const info = (yield* dbUnavailable(objects.blobInfo(repo.orgId, [target.hash]))).get(target.hash)
    if (info === undefined) return yield* notFound(path)
    return { kind: "blob", commit, path: prefix, hash: target.hash, mode: target.mode, size: info.size, chunks: info.chunks } satisfies FileAt
  }
  const pathOf = (name: string) => prefix === "" ? name : `${prefix}/${name}`
  const shown = target.entries.filter((e) => e.kind !== "blob" || policy.canRead(pathOf(e.name)))
  const sizes = yield* dbUnavailable(objects.blobSizes(repo.orgId, shown.filter((e) => e.kind === "blob").map((e) => e.hash)))
  const entries = shown.map((e): DirectoryEntry => ({
    name: e.name,
    path: pathOf(e.name),
    kind: e.kind,
    mode: e.mode,
    hash: e.hash,
    ...(e.kind === "blob" ? { size: sizes.get(e.hash) ?? 0 } : {})
  }))
  return { kind: "tree", commit, path: prefix, hash: target.hash, entries } satisfies Directory
})

/** A file's bytes, streamed from the object store. */
export const fileStream = (repo: RepositoryRef, file: FileAt) =>
  Effect.map(ChunkStore, (chunks) => readChunks(chunks, repo.orgId, file.chunks))

/** A file's bytes in memory, for showing it (callers bound `file.size` first). */
export const fileBytes = (repo: RepositoryRef, file: FileAt) =>
  Effect.gen(function*() {
    const stream = yield* fileStream(repo, file)
    const parts = yield* Stream.runCollect(stream).pipe(
      Effect.mapError(() => new ApiErrors.ServiceUnavailable({ error: "the file could not be read; try again", code: "unavailable", retryable: true }))
    )
    return new Uint8Array(Buffer.concat([...parts]))
  })

/**
 * The bytes of blobs by hash (the repository's organization's), for diffs: blobs over `maxBytes` are
 * left out (the caller shows them as too large). The caller has already checked the paths they are at.
 */
export const blobsByHash = (orgId: string, hashes: ReadonlyArray<string>, maxBytes: number) =>
  Effect.gen(function*() {
    const objects = yield* ContentObjects
    const chunks = yield* ChunkStore
    const infos = yield* dbUnavailable(objects.blobInfo(orgId, [...new Set(hashes)]))
    const wanted = [...infos.values()].filter((info) => info.size <= maxBytes)
    // Every chunk located in one query and read in groups (one range read for many small ones), as
    // a clone reads them: a 200-file diff is 400 blobs, which one by one cost a round trip each.
    const unavailable = () => new ApiErrors.ServiceUnavailable({ error: "a file could not be read; try again", code: "unavailable", retryable: true })
    const hashesOfChunks = [...new Set(wanted.flatMap((info) => info.chunks.map((c) => c.hash)))]
    const located = yield* dbUnavailable(chunks.locate(orgId, hashesOfChunks))
    const data = new Map<string, Uint8Array>()
    yield* Stream.runForEach(readInOrder(chunks, orgId, hashesOfChunks, located), (chunk) => Effect.sync(() => void data.set(chunk.hash, chunk.data))).pipe(
      Effect.mapError(unavailable)
    )
    const out = new Map<string, Uint8Array>()
    for (const info of wanted) {
      const parts: Array<Uint8Array> = []
      for (const chunk of info.chunks) {
        // Not located (the store knows it without a location): read on its own.
        const bytes = data.get(chunk.hash) ??
          new Uint8Array(Buffer.concat([...yield* Stream.runCollect(chunks.read(orgId, chunk.hash)).pipe(Effect.mapError(unavailable))]))
        parts.push(bytes)
      }
      out.set(info.hash, parts.length === 1 ? parts[0]! : new Uint8Array(Buffer.concat(parts)))
    }
    return out
  })
