/**
 * What a site request answers, whichever way it was addressed: the file of `main` under the site's
 * `source_dir`, read as an anonymous reader reads the repository (files/FileReads: path permissions
 * apply, so a withheld file is not served; a private repository serves nothing). `index.html` for a
 * directory, the site's own `404.html` (status 404) for anything missing. Every answer carries a
 * CSP sandbox without `allow-same-origin`: the page runs in an opaque origin, so it can neither read
 * the service's cookies nor call the API with them (see README, "Organization sites").
 * Main's head is resolved on every request (an update merged through any node is served at once);
 * file bytes are cached by blob hash, which is what main's head names, so a cache entry is never stale.
 */
import { ApiErrors, type Caller } from "@grove/api"
import { Effect } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { brotliCompressSync, constants as zlib, gzipSync } from "node:zlib"
import { dbUnavailable } from "../http/Failures.ts"
import { type FileAt, fileBytes, fileStream, pathAt } from "../files/FileReads.ts"
import type { RepositoryRef } from "../path-permissions/PathPermissions.ts"
import { type Site, Sites } from "./Sites.ts"

/** Scripts and forms run, but in an opaque origin (no `allow-same-origin`): never as the service. */
export const SITE_CSP = "sandbox allow-scripts allow-forms allow-popups allow-modals"

const ANONYMOUS: Caller = { principal: { kind: "anonymous" }, limits: { kind: "none" } }

const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  htm: "text/html; charset=utf-8",
  css: "text/css; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  mjs: "text/javascript; charset=utf-8",
  json: "application/json",
  txt: "text/plain; charset=utf-8",
  md: "text/markdown; charset=utf-8",
  xml: "application/xml",
  svg: "image/svg+xml",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  ico: "image/x-icon",
  woff: "font/woff",
  woff2: "font/woff2",
  wasm: "application/wasm",
  pdf: "application/pdf"
}

export const siteContentType = (path: string): string => {
  const name = path.slice(path.lastIndexOf("/") + 1)
  const dot = name.lastIndexOf(".")
  return dot <= 0 ? "application/octet-stream" : TYPES[name.slice(dot + 1).toLowerCase()] ?? "application/octet-stream"
}

const compressible = (type: string) => /^(text\/|application\/(json|xml|wasm)|image\/svg)/.test(type)

/** Files up to this size are read into memory (for ranges, compression and the cache); larger ones stream whole. */
const IN_MEMORY_BYTES = 8 * 1024 * 1024
const CACHE_BYTES = 64 * 1024 * 1024

/** Bytes by `hash:encoding`, least recently used first out. */
const cache = new Map<string, Uint8Array>()
let cached = 0
const remember = (key: string, bytes: Uint8Array) => {
  if (bytes.length > CACHE_BYTES / 8) return bytes
  cache.set(key, bytes)
  cached += bytes.length
  for (const [old, value] of cache) {
    if (cached <= CACHE_BYTES) break
    cache.delete(old)
    cached -= value.length
  }
  return bytes
}
const recall = (key: string) => {
  const bytes = cache.get(key)
  if (bytes !== undefined) {
    cache.delete(key)
    cache.set(key, bytes)
  }
  return bytes
}

const headers = { "content-security-policy": SITE_CSP, "x-content-type-options": "nosniff", "cache-control": "no-cache" }

/** No site, or nothing there and no 404.html: a plain 404, under the same sandbox. */
export const plainNotFound = () =>
  HttpServerResponse.text("404 not found\n", { status: 404, contentType: "text/plain; charset=utf-8", headers })

/** The byte range a `Range` header asks for: one range; undefined for none or several (served whole), "bad" past the end. */
export const rangeOf = (header: string | undefined, size: number): { start: number; end: number } | "bad" | undefined => {
  const match = header === undefined ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  if (match === null) return undefined
  const [, from, to] = match
  if (from === "" && to === "") return undefined
  const start = from === "" ? Math.max(0, size - Number(to)) : Number(from)
  const end = from === "" || to === "" ? size - 1 : Math.min(Number(to), size - 1)
  return start > end || start >= size ? "bad" : { start, end }
}

const preferredEncoding = (accept: string | undefined): "br" | "gzip" | undefined => {
  const wanted = (accept ?? "").toLowerCase().split(",").map((part) => part.trim().split(";")[0])
  return wanted.includes("br") ? "br" : wanted.includes("gzip") ? "gzip" : undefined
}

const unavailable = (error: unknown) =>
  error instanceof ApiErrors.ServiceUnavailable
    ? Effect.succeed(HttpServerResponse.text("the site could not be read; try again\n", { status: 503, headers: { ...headers, "retry-after": "1" } }))
    : Effect.fail(error)

/** One file's answer: 304 on a matching If-None-Match, a range (206/416), or the whole file, compressed when accepted. */
const fileResponse = (repo: RepositoryRef, file: FileAt, status: 200 | 404) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const etag = `"${file.hash}"`
    const type = siteContentType(file.path)
    const common = { ...headers, etag, vary: "Accept-Encoding" }
    const ifNoneMatch = request.headers["if-none-match"]
    if (status === 200 && ifNoneMatch !== undefined && ifNoneMatch.split(",").some((tag) => tag.trim().replace(/^W\//, "") === etag)) {
      return HttpServerResponse.empty({ status: 304, headers: common })
    }
    if (file.size > IN_MEMORY_BYTES) {
      return HttpServerResponse.stream(yield* fileStream(repo, file), { status, contentType: type, contentLength: file.size, headers: common })
    }
    const bytes = recall(file.hash) ?? remember(file.hash, yield* fileBytes(repo, file))
    const range = status === 200 ? rangeOf(request.headers["range"], bytes.length) : undefined
    if (range === "bad") {
      return HttpServerResponse.empty({ status: 416, headers: { ...common, "content-range": `bytes */${bytes.length}` } })
    }
    if (range !== undefined) {
      return HttpServerResponse.uint8Array(bytes.subarray(range.start, range.end + 1), {
        status: 206,
        contentType: type,
        headers: { ...common, "accept-ranges": "bytes", "content-range": `bytes ${range.start}-${range.end}/${bytes.length}` }
      })
    }
    const encoding = compressible(type) && bytes.length > 256 ? preferredEncoding(request.headers["accept-encoding"]) : undefined
    if (encoding === undefined) {
      return HttpServerResponse.uint8Array(bytes, { status, contentType: type, headers: { ...common, "accept-ranges": "bytes" } })
    }
    const key = `${file.hash}:${encoding}`
    const packed = recall(key) ??
      remember(key, encoding === "br" ? brotliCompressSync(bytes, { params: { [zlib.BROTLI_PARAM_QUALITY]: 5 } }) : gzipSync(bytes))
    return HttpServerResponse.uint8Array(packed, { status, contentType: type, headers: { ...common, "content-encoding": encoding } })
  })

/** The file at `path` of the site (a directory: its index.html), as an anonymous reader sees main; undefined when there is none. */
const findFile = (repo: RepositoryRef, path: string): Effect.Effect<FileAt | undefined, ApiErrors.ServiceUnavailable, Effect.Services<ReturnType<typeof pathAt>>> =>
  pathAt(ANONYMOUS, repo, "main", path).pipe(
    Effect.flatMap((found) => found.kind === "blob" ? Effect.succeed(found) : pathAt(ANONYMOUS, repo, "main", `${path}/index.html`)),
    Effect.map((found) => found.kind === "blob" ? found : undefined),
    Effect.catch((error) =>
      error instanceof ApiErrors.NotFound || error instanceof ApiErrors.BadRequest ? Effect.succeed(undefined) : Effect.fail(error)
    )
  )

/**
 * The answer for `path` (the request's path below the site's root, still percent-encoded) of the
 * organization `slug`'s site; `base` is the site root's URL path, for the redirect of a directory
 * asked for without its trailing slash.
 */
export const serveSite = (slug: string, path: string, base: string) =>
  Effect.gen(function*() {
    const site: Site | undefined = yield* dbUnavailable((yield* Sites).find(slug))
    if (site === undefined || !site.isPublic) return plainNotFound()
    const repo: RepositoryRef = { id: site.repoId, orgId: site.orgId, owner: site.orgSlug, callerRole: undefined }
    let segments: Array<string>
    try {
      segments = path.split("/").filter((s) => s !== "").map((s) => decodeURIComponent(s))
    } catch {
      return plainNotFound()
    }
    // `.`, `..` and names with a slash or a control character are no tree entry names: never a way out.
    if (segments.some((s) => s === "." || s === ".." || s.includes("/") || s.includes("\\"))) return plainNotFound()
    const full = [...(site.sourceDir === "" ? [] : [site.sourceDir]), ...segments].join("/")
    const file = yield* findFile(repo, full)
    if (file !== undefined) {
      // A directory's index.html, asked for without the slash: relative links need the slash.
      if (file.path !== full && !path.endsWith("/")) {
        return HttpServerResponse.redirect(`${base}${path}/`, { status: 301, headers })
      }
      return yield* fileResponse(repo, file, 200)
    }
    const notFoundPage = yield* findFile(repo, [...(site.sourceDir === "" ? [] : [site.sourceDir]), "404.html"].join("/"))
    return notFoundPage === undefined ? plainNotFound() : yield* fileResponse(repo, notFoundPage, 404)
  }).pipe(Effect.catch(unavailable))
