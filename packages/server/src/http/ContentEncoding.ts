/**
 * zstd on the wire for request and response bodies (the `body_compression: zstd_v1` capability):
 *
 * - A request with `Content-Encoding: zstd` on a route that takes it (the JSON API, `chunks/batch`)
 *   is decoded when its handler reads the body: the compressed bytes are read with the route's limit
 *   (`BodyLimits`), and the decompressed bytes are bounded by the same limit, so a zstd bomb stops
 *   at the limit with the 413 a raw body that large gets; bytes that are not zstd answer 400. The
 *   route's handler sees the plain body; it never knows the difference.
 * - A few KiB of zstd can stand for gigabytes, so decoding is a stream that stops early: past
 *   `RATIO_FROM` plain bytes a body may not be more than `MAX_RATIO` times its compressed size (413:
 *   a push's JSON compresses ~7x), the window is RFC 9659's 8 MiB, and the plain bytes held by all
 *   zstd requests at once may not pass `DECODE_BUDGET` (the next one answers 503 at once: waiting
 *   for bytes others hold until their requests end could deadlock). Concurrent pushes can fill it with
 *   chunk batches (up to 16 MiB plain each, three in flight a push): grove sends a batch answered so
 *   again at once as per-chunk frames, which the chunk handler decodes outside this budget.
 * - A JSON answer of at least `RESPONSE_FROM` bytes to a caller that sent `Accept-Encoding: zstd` goes
 *   zstd-compressed (`Content-Encoding: zstd`, `Accept-Encoding` added to its `Vary`); anyone else gets it as before.
 *
 * Clients that never send the header (the Oak client, older `grove`s) see no change.
 */
import * as BodyCompression from "@grove/core/objects/BodyCompression"
import { Effect, Stream } from "effect"
import { HttpBody, HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse, UrlParams } from "effect/http"
import { inflate } from "./ZstdInflation.ts"

/** Smaller answers are not worth a frame header and a thread-pool trip. */
export const RESPONSE_FROM = 8 * 1024

/** The value of `Content-Encoding` when it is exactly zstd (case and blanks aside). */
export const isZstd = (header: string | undefined): boolean => header !== undefined && header.trim().toLowerCase() === "zstd"

const acceptsZstd = (header: string | undefined): boolean =>
  header !== undefined && header.split(",").some((part) => {
    const [coding, ...params] = part.split(";").map((s) => s.trim().toLowerCase())
    return coding === "zstd" && !params.some((p) => /^q=0(\.0*)?$/.test(p))
  })

const parseError = (request: HttpServerRequest.HttpServerRequest, reason: "Parse" | "BodyTooLarge", description: string, cause?: unknown) =>
  new HttpServerError.HttpServerError({
    reason: new HttpServerError.RequestParseError({ request, reason, description, ...(cause === undefined ? {} : { cause }) })
  })

/** A body read stopped at the route's limit (raw, or decompressed past it). */
export const isBodyTooLarge = (error: unknown): boolean =>
  HttpServerError.isHttpServerError(error) && error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"

const MiB = 1024 * 1024
/** The most plain bytes zstd bodies may hold at once, process-wide: one push at its limit (`BodyLimits.PUSH_LIMIT`). */
export const DECODE_BUDGET = 256 * MiB
/** Past this many plain bytes a body must have compressed at most `MAX_RATIO` times (honest JSON: ~7x); senders read the same rule. */
export const { MAX_RATIO, RATIO_FROM } = BodyCompression

let inUse = 0

/** The plain bytes zstd bodies hold now (for tests and the budget). */
export const decodeBudgetInUse = (): number => inUse

/**
 * One request's share of `DECODE_BUDGET`: taken as the body inflates, given back (`release`) when the
 * request ends, since the handler holds the plain bytes until then. `busy` says the budget ran out.
 */
export class DecodeShare {
  private held = 0
  busy = false
  take(bytes: number): boolean {
    if (inUse + bytes > DECODE_BUDGET) {
      this.busy = true
      return false
    }
    inUse += bytes
    this.held += bytes
    return true
  }
  release(): void {
    inUse -= this.held
    this.held = 0
  }
}

/**
 * Inflates the body of `request`, `length` bytes as its `Content-Length` says, once all its parts are in (kept as they
 * came, never gathered into one buffer: the ratio is reckoned on the declared length, which the HTTP parser holds the
 * body to). Not as they arrive: a body that stalls must hold none of the decode budget.
 */
const decompressStreamed = (request: HttpServerRequest.HttpServerRequest, length: number, limit: number, share: DecodeShare) =>
  Effect.flatMap(Stream.runCollect(request.stream), (parts) => inflate(parts, length, limit, share))

/** Decoded bodies from this size on are given back by `discardBody`; smaller ones are not worth it. */
const DISCARD_FROM = 1024 * 1024
const DISCARD = Symbol("grove/ContentEncoding/discard")

/** A `Content-Length` the body is held to (none with chunked transfer coding). */
const contentLength = (request: HttpServerRequest.HttpServerRequest): number | undefined => {
  if (request.headers["transfer-encoding"] !== undefined) return undefined
  const value = request.headers["content-length"]
  const length = value === undefined || !/^\s*\d+\s*$/.test(value) ? NaN : Number(value)
  return Number.isSafeInteger(length) ? length : undefined
}

/**
 * `request` whose body accessors answer the decompressed bytes (read and decoded once, on first use).
 * The compressed bytes are read under the `MaxBodySize` the route runs with; the plain bytes may be at most `limit`,
 * taken from `share` (which the caller releases when the request ends).
 */
export const zstdDecodedRequest = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number,
  share: DecodeShare
): HttpServerRequest.HttpServerRequest => {
  let decoded: Uint8Array | undefined
  const plain = Effect.suspend(() =>
    decoded !== undefined ? Effect.succeed(decoded) : Effect.gen(function*() {
      const length = contentLength(request)
      // A body of a known length is kept as its parts come (no copy of it gathered first); one without, read whole.
      const inflated = length !== undefined && length <= limit
        ? decompressStreamed(request, length, limit, share)
        : Effect.flatMap(request.arrayBuffer, (compressed) => inflate([new Uint8Array(compressed)], compressed.byteLength, limit, share))
      const out = yield* Effect.catch(inflated, (error) =>
        HttpServerError.isHttpServerError(error) ? Effect.fail(error) : Effect.fail(
          error === "too_large"
            ? parseError(request, "BodyTooLarge", `the decompressed body must be at most ${limit} bytes`)
            : error === "ratio"
            ? parseError(request, "BodyTooLarge", `the body decompresses to more than ${MAX_RATIO} times its size`)
            : error === "trailing"
            ? parseError(request, "Parse", "the body is not valid zstd: bytes after its frame")
            : error === "busy"
            // BodyLimits answers 503 for it (share.busy), whatever the handler makes of this.
            ? parseError(request, "Parse", "too many compressed bodies are being decoded")
            : parseError(request, "Parse", "the body is not valid zstd", error)
        ))
      decoded = new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
      return decoded
    })
  )
  const discard = () => {
    // Only a buffer zstd made for this body alone (large ones never come from Buffer's shared pool).
    if (decoded !== undefined && decoded.buffer.byteLength >= DISCARD_FROM) (decoded.buffer as ArrayBuffer).transfer(0)
    decoded = new Uint8Array()
  }
  return bodyView(request, plain, discard)
}

/**
 * Frees a decoded zstd body's memory now, not at the next full GC: the request's body is empty afterwards, and every
 * view of it too. A handler calls it once done with the body, on success only: after a failure or an interruption a
 * write of a view of it may still be under way (a detached buffer's memory is freed at once). A chunk batch's plain
 * bytes (~2.5 MiB, held from its first byte until its packs are stored) outlive a few scavenges, and ~50 MiB of them a
 * push piled up as old external memory made V8 run a full GC for them in every push's uploads.
 */
export const discardBody = (request: HttpServerRequest.HttpServerRequest): void => {
  const discard: unknown = Reflect.get(request, DISCARD)
  if (typeof discard === "function") discard()
}

const textDecoder = new TextDecoder()
// As the platform decodes a form (a leading BOM kept, a leading "?" not taken for a query's).
const formDecoder = new TextDecoder("utf-8", { ignoreBOM: true })

/**
 * `request` whose body accessors answer `body` (read or decoded elsewhere, once), also on a copy the
 * router makes with `modify`; the JSON and form parsing is the platform's (an empty body is `null`).
 * `arrayBuffer` answers the body's own buffer when the bytes fill it, the one `stream`, `text` and `json`
 * read too, not a copy: a handler must not write into it nor transfer (detach) it, e.g. to a worker.
 */
export const bodyView = (
  request: HttpServerRequest.HttpServerRequest,
  body: Effect.Effect<Uint8Array, HttpServerError.HttpServerError>,
  discard?: () => void
): HttpServerRequest.HttpServerRequest => {
  // The bytes' own buffer when they fill it (a body's only copy: no second one of a 256 MiB push).
  const arrayBuffer = Effect.map(body, (bytes) =>
    (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes.buffer : bytes.slice().buffer) as ArrayBuffer)
  const text = Effect.map(body, (bytes) => textDecoder.decode(bytes))
  const parse = <A>(request: HttpServerRequest.HttpServerRequest, f: () => A) =>
    Effect.try({ try: f, catch: (cause) => parseError(request, "Parse", "the body cannot be parsed", cause) })
  return new Proxy(request, {
    get(target, property) {
      switch (property) {
        case DISCARD:
          return discard
        case "arrayBuffer":
          return arrayBuffer
        case "text":
          return text
        case "json":
          return Effect.flatMap(text, (value) => parse(target, () => value === "" ? null : JSON.parse(value) as unknown))
        case "urlParamsBody":
          return Effect.flatMap(body, (bytes) =>
            parse(target, () => UrlParams.fromInput(new URLSearchParams(formDecoder.decode(bytes).replace(/^\?/, "%3F")))))
        case "stream":
          return Stream.fromEffect(body)
        case "modify":
          return (options: Parameters<HttpServerRequest.HttpServerRequest["modify"]>[0]) => bodyView(target.modify(options), body, discard)
        default: {
          const value: unknown = Reflect.get(target, property, target)
          return typeof value === "function" ? value.bind(target) : value
        }
      }
    }
  })
}

/** JSON, or a JSON-based type of Grove's own (`+json`: the compact pull answer). */
const isJsonType = (contentType: string | undefined): boolean => {
  const type = contentType?.split(";")[0]!.trim().toLowerCase()
  return type === "application/json" || (type?.startsWith("application/vnd.grove.") === true && type.endsWith("+json"))
}

/**
 * A `Vary` that also names `header`: an answer that already varies (the pull on Accept, a repository's JSON or page)
 * keeps what it said, or a shared cache would hand one form to a caller that asked for the other.
 */
export const varyWith = (vary: string | undefined, header: string): string => {
  if (vary === undefined || vary.trim() === "") return header
  const names = vary.split(",").map((name) => name.trim().toLowerCase())
  return names.includes("*") || names.includes(header) ? vary : `${vary}, ${header}`
}

/** Large JSON answers zstd-compressed for callers that accept it. */
export const ResponseCompressionLive = HttpRouter.middleware((httpEffect) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const response = yield* httpEffect
    if (!acceptsZstd(request.headers["accept-encoding"])) return response
    const body = response.body
    if (body._tag !== "Uint8Array" || body.body.length < RESPONSE_FROM || !isJsonType(body.contentType)) return response
    if (response.headers["content-encoding"] !== undefined) return response
    const compressed = yield* Effect.orElseSucceed(Effect.tryPromise(() => BodyCompression.compress(body.body)), () => undefined)
    if (compressed === undefined || compressed.length >= body.body.length) return response
    return HttpServerResponse.setHeaders(
      HttpServerResponse.setBody(response, HttpBody.uint8Array(compressed, body.contentType)),
      { "content-encoding": "zstd", vary: varyWith(response.headers["vary"], "accept-encoding") }
    )
  }), { global: true })
