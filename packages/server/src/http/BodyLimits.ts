/**
 * Bounded input before any work: every route has its own body limit, checked by a global
 * middleware before routing (so before the token is looked up or anything is parsed).
 *
 * - A declared `Content-Length` past the route's limit answers 413 `{ error, code: "payload_too_large" }`
 *   at once, without reading the body (`Connection: close`).
 * - A body without a length (chunked) on a small route (at most 1 MiB: every JSON route but the push
 *   and `blobs/info`, and the sign-in form) is read here, before the token is looked up or anything
 *   touches the database, with the route's limit: the read stops past it and the request answers
 *   the same 413, so memory never holds more than the limit. The handler then reads the bytes read
 *   here. Larger routes read a chunked body with the route's limit as `MaxBodySize` where they
 *   read it, after `AccessBeforeBody` has authenticated the caller and authorized the repository
 *   from the path (buffering 256 MiB for anyone who asks would be the attack).
 * - A body on a JSON route that is not `application/json` answers 415 `{ error, code: "unsupported_media_type" }`.
 *
 * Small JSON routes get 1 MiB (10,000 hashes, the most a hash list but `blobs/info`'s may carry, fit in 0.7 MiB).
 * The push (and a staged push's batch) keeps its large limit (small blobs travel inline as number arrays, about 4 bytes per
 * byte); the binary routes keep theirs and check them again while streaming.
 */
import type { Access } from "@grove/core"
import { ByteSize, Effect, Result } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerRequest } from "effect/http"
import { HttpServerResponse as Response } from "effect/http"
import { bodyView, DecodeShare, isBodyTooLarge, isZstd, zstdDecodedRequest } from "./ContentEncoding.ts"

const KiB = 1024
const MiB = 1024 * KiB

/** Every JSON route that is not named below. */
export const DEFAULT_LIMIT = 1 * MiB
/** `POST /api/{owner}/{name}/push`: as before this limit existed. */
export const PUSH_LIMIT = 256 * MiB
/** One chunk or one batch of chunks (`ChunkRoutes`). */
export const CHUNK_UPLOAD_LIMIT = 64 * MiB
/** A release binary: the route checks the configured limit (`--release-max-bytes`) itself, after authorizing; this is its ceiling. */
export const RELEASE_UPLOAD_CEILING = 8 * 1024 * MiB

/** Captured, so that a rule's `owner` and `name` (the first two parameters) can be read. */
const SEGMENT = "([^/]+)"

interface Rule {
  readonly method: string
  readonly pattern: RegExp
  readonly limit: number
  /** The body is not JSON (binary frames, a form, git's protocol): no 415 check here. */
  readonly raw?: boolean
  /**
   * What the caller must be allowed on `/api/{owner}/{name}` before a byte of the body is read
   * (`AccessBeforeBody`): the routes whose bodies are larger than the pre-read limit.
   */
  readonly access?: Access.Action
  /** A raw route that also takes a `Content-Encoding: zstd` body (JSON routes all do: `ContentEncoding`). */
  readonly zstd?: boolean
}

const route = (method: string, path: string, limit: number, options: { raw?: boolean; access?: Access.Action; zstd?: boolean } = {}): Rule => ({
  method,
  pattern: new RegExp(`^${path.split("/").map((part) => part.startsWith(":") ? SEGMENT : part).join("/")}$`),
  limit,
  ...options
})

const RULES: ReadonlyArray<Rule> = [
  route("POST", "/api/:owner/:name/push", PUSH_LIMIT, { access: "write" }),
  route("POST", "/api/:owner/:name/push/staged-v1", PUSH_LIMIT, { access: "write" }),
  // 10,000 chunk references per page, as the Oak client pages them (at most 2 MiB each).
  route("PUT", "/api/:owner/:name/blobs/proofs/:token/mappings", 2 * MiB, { access: "write" }),
  // Up to 250,000 hashes (67 bytes each in JSON).
  route("POST", "/api/:owner/:name/blobs/info", 20 * MiB, { access: "read" }),
  route("PUT", "/api/:owner/:name/chunks/:hash", CHUNK_UPLOAD_LIMIT, { raw: true, access: "write" }),
  route("POST", "/api/:owner/:name/chunks/batch", CHUNK_UPLOAD_LIMIT, { raw: true, access: "write", zstd: true }),
  // No access rule: a chunk link's token (in the body) may be the credential; the route reads at most 2 MiB.
  route("POST", "/api/:owner/:name/chunks/fetch", 2 * MiB, { raw: true, zstd: true }),
  route("POST", "/:owner/:repo/git-upload-pack", 8 * MiB, { raw: true }),
  route("POST", "/cli-auth", 16 * KiB, { raw: true }),
  route("PUT", "/api/releases/:version/:platform", RELEASE_UPLOAD_CEILING, { raw: true })
]

export interface BodyLimit {
  readonly limit: number
  /** Whether the route reads a JSON body (the API's routes), so other media types answer 415. */
  readonly json: boolean
  /** Whether a `Content-Encoding: zstd` body is decoded for the route (with `limit` on the plain bytes too). */
  readonly zstd: boolean
}

/** The body limit of a request's route. */
export const bodyLimit = (method: string, pathname: string): BodyLimit => {
  for (const rule of RULES) {
    if (rule.method === method && rule.pattern.test(pathname)) return { limit: rule.limit, json: rule.raw !== true, zstd: rule.raw !== true || rule.zstd === true }
  }
  const json = pathname === "/api" || pathname.startsWith("/api/")
  return { limit: DEFAULT_LIMIT, json, zstd: json }
}

export interface BodyAccess {
  readonly action: Access.Action
  /** As in the path (percent-encoded). */
  readonly owner: string
  readonly name: string
}

/** What a request must be allowed before its body is read, for the routes that name one. */
export const bodyAccess = (method: string, pathname: string): BodyAccess | undefined => {
  for (const rule of RULES) {
    if (rule.method !== method || rule.access === undefined) continue
    const match = rule.pattern.exec(pathname)
    if (match !== null) return { action: rule.access, owner: match[1]!, name: match[2]! }
  }
  return undefined
}

/** The repository routes (`/api/{owner}/{name}/...`) that take a JSON body; none of the `/api/orgs/{slug}/...` ones. */
const REPO_JSON_ROUTE = /^\/api\/([^/]+)\/([^/]+)\/(?:ci|transfer|branches|commits|path-permissions|push|blobs|chunks|webhooks)(?:\/|$)/

/**
 * A zstd body on a repository route needs at least `read` before it is inflated, so a repository that
 * does not exist or that the caller may not see answers 404 without decoding work. Not `chunks/fetch`:
 * a chunk link's token in the body may be its credential (its plain bytes stay bounded: 2 MiB).
 */
export const zstdBodyAccess = (method: string, pathname: string, contentEncoding: string | undefined): BodyAccess | undefined => {
  if (!isZstd(contentEncoding) || pathname.endsWith("/chunks/fetch")) return undefined
  if (!bodyLimit(method, pathname).zstd) return undefined
  const match = REPO_JSON_ROUTE.exec(pathname)
  return match === null ? undefined : { action: "read", owner: match[1]!, name: match[2]! }
}

export const payloadTooLarge = (limit: number) =>
  Response.jsonUnsafe({ error: `the request body must be at most ${limit} bytes`, code: "payload_too_large" }, {
    status: 413,
    headers: { connection: "close", "x-content-type-options": "nosniff" }
  })

export const unsupportedMediaType = (contentType: string) =>
  Response.jsonUnsafe({
    error: `unsupported content type '${contentType.slice(0, 100)}': send application/json`,
    code: "unsupported_media_type"
  }, { status: 415, headers: { "accept": "application/json", "x-content-type-options": "nosniff" } })

const hasBody = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const length = request.headers["content-length"]
  if (length !== undefined) return length.trim() !== "0"
  return request.headers["transfer-encoding"] !== undefined
}

/** `application/json`, with or without parameters (`; charset=utf-8`): what the API decodes. */
const isJson = (contentType: string): boolean => {
  const type = contentType.split(";")[0]!.trim().toLowerCase()
  return type === "application/json"
}

/** A request URL without its query. */
export const pathnameOf = (url: string): string => {
  const query = url.indexOf("?")
  return query === -1 ? url : url.slice(0, query)
}

/** Routes whose chunked bodies are read before any other work. */
export const PREREAD_LIMIT = DEFAULT_LIMIT

export const decodeBusy = () =>
  Response.jsonUnsafe({ error: "too many compressed request bodies are being decoded: retry shortly", code: "unavailable", retryable: true }, {
    status: 503,
    headers: { "retry-after": "1", "x-content-type-options": "nosniff" }
  })

/** The route with its zstd body decoded on read; the plain bytes count against `DECODE_BUDGET` until the request ends. */
const serveDecoded = <A, E, R>(httpEffect: Effect.Effect<A, E, R>, read: HttpServerRequest.HttpServerRequest, limit: number) =>
  Effect.suspend(() => {
    const share = new DecodeShare()
    return Effect.provideService(httpEffect, HttpServerRequest.HttpServerRequest, zstdDecodedRequest(read, limit, share)).pipe(
      Effect.exit,
      // Whatever the handler made of the failed read (400, a defect), the answer is the 503.
      Effect.flatMap((exit) => share.busy ? Effect.succeed(decodeBusy() as A) : exit),
      Effect.ensuring(Effect.sync(() => share.release()))
    )
  })

// Like JsonErrorsLive: a global middleware answers for every route, hence the widening cast.
export const BodyLimitsLive = HttpRouter.middleware((httpEffect) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const { limit, json, zstd } = bodyLimit(request.method, pathnameOf(request.url))
    const declared = request.headers["content-length"]
    if (declared !== undefined && Number(declared) > limit) return payloadTooLarge(limit)
    if (json && hasBody(request)) {
      const contentType = request.headers["content-type"]
      if (contentType !== undefined && !isJson(contentType)) return unsupportedMediaType(contentType)
    }
    const bounded = Effect.provideService(httpEffect, HttpIncomingMessage.MaxBodySize, ByteSize.bytes(limit))
    // A zstd body is decoded when the handler reads it, the plain bytes bounded by the same limit.
    const decoded = zstd && isZstd(request.headers["content-encoding"])
    const serve = (read: HttpServerRequest.HttpServerRequest) => decoded ? serveDecoded(bounded, read, limit) : bounded
    if (declared !== undefined || limit > PREREAD_LIMIT || request.headers["transfer-encoding"] === undefined) {
      return yield* (decoded ? serve(request) : bounded)
    }
    // Chunked: read it now (at most the limit), before the token or the database are touched.
    const read = yield* Effect.result(
      Effect.provideService(request.arrayBuffer, HttpIncomingMessage.MaxBodySize, ByteSize.bytes(limit))
    )
    if (Result.isFailure(read)) {
      if (isBodyTooLarge(read.failure)) return payloadTooLarge(limit)
      return yield* Effect.fail(read.failure)
    }
    return yield* serve(bodyView(request, Effect.succeed(new Uint8Array(read.success))))
  }) as unknown as typeof httpEffect, { global: true })
