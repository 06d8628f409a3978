/**
 * zstd on the wire for request and response bodies (the `body_compression: zstd_v1` capability):
 *
 * - A request with `Content-Encoding: zstd` on a route that takes it (the JSON API, `chunks/batch`)
 *   is decoded when its handler reads the body: the compressed bytes are read with the route's limit
 *   (`BodyLimits`), and the decompressed bytes are bounded by the same limit, so a zstd bomb stops
 *   at the limit with the 413 a raw body that large gets; bytes that are not zstd answer 400. The
 *   route's handler sees the plain body; it never knows the difference.
 * - A JSON answer of at least `RESPONSE_FROM` bytes to a caller that sent `Accept-Encoding: zstd` goes
 *   zstd-compressed (`Content-Encoding: zstd`, `Vary: Accept-Encoding`); anyone else gets it as before.
 *
 * Clients that never send the header (the Oak client, older `grove`s) see no change.
 */
import { Effect, Stream } from "effect"
import { HttpBody, HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { constants, zstdCompress, zstdDecompress } from "node:zlib"

export const CAPABILITY = "body_compression"
export const ZSTD_V1 = "zstd_v1"

/** Smaller answers are not worth a frame header and a thread-pool trip. */
export const RESPONSE_FROM = 8 * 1024

/** As the client compresses a push (packages/cli/src/sync/BodyCompression.ts): hash lists repeat far apart. */
const COMPRESS_PARAMS = {
  params: {
    [constants.ZSTD_c_compressionLevel]: 3,
    [constants.ZSTD_c_windowLog]: 23,
    [constants.ZSTD_c_hashLog]: 20
  }
}

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

/** Node's errors when the output would pass `maxOutputLength`. */
const overLimit = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code
  return code === "ERR_BUFFER_TOO_LARGE" || error instanceof RangeError
}

const decompress = (compressed: Uint8Array, limit: number) =>
  Effect.callback<Buffer, unknown>((resume) => {
    zstdDecompress(compressed, { maxOutputLength: Math.max(1, limit) }, (error, out) => resume(error === null ? Effect.succeed(out) : Effect.fail(error)))
  })

/**
 * `request` whose body accessors answer the decompressed bytes (read and decoded once, on first use).
 * The compressed bytes are read under the `MaxBodySize` the route runs with; the plain bytes may be at most `limit`.
 */
export const zstdDecodedRequest = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number
): HttpServerRequest.HttpServerRequest => {
  let decoded: Uint8Array | undefined
  const plain = Effect.suspend(() =>
    decoded !== undefined ? Effect.succeed(decoded) : Effect.gen(function*() {
      const compressed = new Uint8Array(yield* request.arrayBuffer)
      const out = yield* Effect.catch(decompress(compressed, limit), (error) =>
        Effect.fail(
          overLimit(error)
            ? parseError(request, "BodyTooLarge", `the decompressed body must be at most ${limit} bytes`)
            : parseError(request, "Parse", "the body is not valid zstd", error)
        ))
      decoded = new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
      return decoded
    })
  )
  return decodedView(request, plain)
}

const decodedView = (
  request: HttpServerRequest.HttpServerRequest,
  body: Effect.Effect<Uint8Array, HttpServerError.HttpServerError>
): HttpServerRequest.HttpServerRequest => {
  const arrayBuffer = Effect.map(body, (bytes) => bytes.slice().buffer as ArrayBuffer)
  const text = Effect.map(body, (bytes) => new TextDecoder().decode(bytes))
  return new Proxy(request, {
    get(target, property) {
      switch (property) {
        case "arrayBuffer":
          return arrayBuffer
        case "text":
          return text
        case "json":
          return Effect.flatMap(text, (value) =>
            Effect.try({ try: () => JSON.parse(value) as unknown, catch: (cause) => parseError(target, "Parse", "invalid JSON", cause) }))
        case "stream":
          return Stream.fromEffect(body)
        case "modify":
          return (options: Parameters<HttpServerRequest.HttpServerRequest["modify"]>[0]) => decodedView(target.modify(options), body)
        default: {
          const value: unknown = Reflect.get(target, property, target)
          return typeof value === "function" ? value.bind(target) : value
        }
      }
    }
  })
}

const compress = (bytes: Uint8Array) =>
  Effect.callback<Buffer, unknown>((resume) => {
    zstdCompress(bytes, COMPRESS_PARAMS, (error, out) => resume(error === null ? Effect.succeed(out) : Effect.fail(error)))
  })

const isJsonType = (contentType: string | undefined): boolean =>
  contentType !== undefined && contentType.split(";")[0]!.trim().toLowerCase() === "application/json"

/** Large JSON answers zstd-compressed for callers that accept it. */
export const ResponseCompressionLive = HttpRouter.middleware((httpEffect) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const response = yield* httpEffect
    if (!acceptsZstd(request.headers["accept-encoding"])) return response
    const body = response.body
    if (body._tag !== "Uint8Array" || body.body.length < RESPONSE_FROM || !isJsonType(body.contentType)) return response
    if (response.headers["content-encoding"] !== undefined) return response
    const compressed = yield* Effect.orElseSucceed(compress(body.body), () => undefined)
    if (compressed === undefined || compressed.length >= body.body.length) return response
    return HttpServerResponse.setHeaders(
      HttpServerResponse.setBody(response, HttpBody.uint8Array(new Uint8Array(compressed.buffer, compressed.byteOffset, compressed.byteLength), body.contentType)),
      { "content-encoding": "zstd", vary: "accept-encoding" }
    )
  }), { global: true })
