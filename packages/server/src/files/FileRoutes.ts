/**
 * `GET /api/{owner}/{name}/raw/{commit}/{path}`: a file's bytes at a commit
 * (or at a branch's head), streamed chunk by chunk from the object store.
 */
import { ApiErrors, ApiParams } from "@grove/api"
import { Effect, Layer, Schema } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { CommitPaths, pathSegments } from "../content/CommitPaths.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { readChunks } from "../content/ChunkReads.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { callerPolicy } from "../path-permissions/CallerPolicy.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { routeParams } from "../http/PathParams.ts"
import { answer, routeRepository } from "../http/RawRoutes.ts"

const TYPES: Record<string, string> = {
  txt: "text/plain; charset=utf-8",
  md: "text/markdown; charset=utf-8",
  json: "application/json",
  js: "text/javascript; charset=utf-8",
  ts: "text/plain; charset=utf-8",
  css: "text/css; charset=utf-8",
  csv: "text/csv; charset=utf-8",
  xml: "application/xml",
  yml: "text/plain; charset=utf-8",
  yaml: "text/plain; charset=utf-8",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  pdf: "application/pdf",
  zip: "application/zip",
  gz: "application/gzip",
  wasm: "application/wasm"
}

/**
 * A type from the extension. HTML, SVG and anything unknown are served as application/octet-stream
 * (with nosniff and a sandbox policy) so a repository's file can never run script in the server's origin.
 */
export const contentTypeOf = (path: string): string => {
  const dot = path.lastIndexOf(".")
  const slash = path.lastIndexOf("/")
  if (dot <= slash + 1) return "application/octet-stream"
  return TYPES[path.slice(dot + 1).toLowerCase()] ?? "application/octet-stream"
}

const rawParams = routeParams({ commit: ApiParams.CommitRef, "*": Schema.optionalKey(ApiParams.RepoPath) })

const raw = HttpRouter.add("GET", "/api/:owner/:name/raw/:commit/*", answer(Effect.gen(function*() {
  const params = yield* rawParams
  const { repo, caller } = yield* routeRepository("read")
  const paths = yield* CommitPaths
  const objects = yield* ContentObjects
  const chunks = yield* ChunkStore
  const path = params["*"] ?? ""
  const segments = pathSegments(path)
  if (!segments.ok) return yield* new ApiErrors.BadRequest({ error: segments.reason, code: "invalid_path" })
  const ref = params.commit
  const commit = yield* dbUnavailable(paths.resolveCommit(repo.id, ref))
  if (commit === undefined) return yield* new ApiErrors.NotFound({ error: `commit '${ref.slice(0, 100)}' not found`, code: "commit_not_found" })
  const target = yield* dbUnavailable(paths.resolvePath(repo.orgId, commit.manifest_hash, segments.segments))
  // A file the caller may not read (path permissions) answers as if it were not there.
  const policy = yield* callerPolicy(caller, repo)
  if (target === undefined || target.kind !== "blob" || !policy.canRead(segments.segments.join("/"))) {
    return yield* new ApiErrors.NotFound({ error: `no file at '${path.slice(0, 200)}'`, code: "path_not_found" })
  }
  const info = (yield* dbUnavailable(objects.blobInfo(repo.orgId, [target.hash]))).get(target.hash)
  if (info === undefined) return yield* new ApiErrors.NotFound({ error: `no file at '${path.slice(0, 200)}'`, code: "path_not_found" })
  const body = readChunks(chunks, repo.orgId, info.chunks)
  return HttpServerResponse.stream(body, {
    contentType: contentTypeOf(path),
    contentLength: info.size,
    headers: {
      "x-content-type-options": "nosniff",
      "content-security-policy": "sandbox",
      etag: `"${target.hash}"`,
      "x-grove-blob": target.hash,
      "x-grove-mode": target.mode
    }
  })
})))

export const FileRoutes = Layer.mergeAll(raw)
