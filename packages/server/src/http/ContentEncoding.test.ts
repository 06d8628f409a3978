/**
 * Decoding a zstd request body (`zstdDecodedRequest`): the plain bytes come from the process-wide
 * budget and go back when released; a body past 64x (beyond 4 MiB) is refused as too large; a frame
 * asking for more than an 8 MiB window is not decoded at all.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse, UrlParams } from "effect/http"
import { constants, zstdCompressSync } from "node:zlib"
import {
  bodyView,
  DECODE_BUDGET,
  DecodeShare,
  decodeBudgetInUse,
  discardBody,
  MAX_RATIO,
  RATIO_FROM,
  ResponseCompressionLive,
  RESPONSE_FROM,
  varyWith,
  zstdDecodedRequest
} from "./ContentEncoding.ts"

const MiB = 1024 * 1024

const requestOf = (body: Uint8Array) => HttpServerRequest.fromWeb(new Request("http://grove.test/api/o/n/push", { method: "POST", body }))

/** The decoded body's size, or the failure's reason. */
const decode = (compressed: Uint8Array, share: DecodeShare, limit = 256 * MiB) =>
  zstdDecodedRequest(requestOf(compressed), limit, share).arrayBuffer.pipe(
    Effect.map((bytes) => bytes.byteLength),
    Effect.catch((error) =>
      Effect.succeed(HttpServerError.isHttpServerError(error) && error.reason._tag === "RequestParseError" ? error.reason.reason : "other")
    )
  )

/** `size` bytes that compress well under 64x: one pseudo-random byte in every 8. */
const compressible = (size: number) => {
  const bytes = Buffer.alloc(size, 0x61)
  let state = 1
  for (let i = 0; i < size; i += 8) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    bytes[i] = state >>> 24
  }
  return bytes
}

it.effect("takes the plain bytes from the budget until released; past the budget the request is busy", () =>
  Effect.gen(function*() {
    const body = zstdCompressSync(compressible(6 * MiB))
    expect(body.length * MAX_RATIO).toBeGreaterThan(6 * MiB)
    const start = decodeBudgetInUse()
    const share = new DecodeShare()
    expect(yield* decode(body, share)).toBe(6 * MiB)
    expect(decodeBudgetInUse() - start).toBe(6 * MiB)
    share.release()
    expect(decodeBudgetInUse()).toBe(start)

    // Someone holds all but 1 MiB: the next body fails part-way, and what it took goes back.
    const hog = new DecodeShare()
    expect(hog.take(DECODE_BUDGET - start - MiB)).toBe(true)
    const late = new DecodeShare()
    expect(yield* decode(body, late)).toBe("Parse")
    expect(late.busy).toBe(true)
    late.release()
    hog.release()
    expect(decodeBudgetInUse()).toBe(start)
  }))

it.effect("refuses more than 64x past 4 MiB as too large, and a window over 8 MiB as invalid", () =>
  Effect.gen(function*() {
    const share = new DecodeShare()
    // Under RATIO_FROM any ratio goes (a small, very repetitive body is honest).
    expect(yield* decode(zstdCompressSync(Buffer.alloc(RATIO_FROM - 1)), share)).toBe(RATIO_FROM - 1)
    expect(yield* decode(zstdCompressSync(Buffer.alloc(RATIO_FROM + MiB)), share)).toBe("BodyTooLarge")
    share.release()
    const wide = zstdCompressSync(compressible(2 * MiB), { params: { [constants.ZSTD_c_windowLog]: 24 }, pledgedSrcSize: 2 * MiB })
    // A declared size smaller than the window lets the decoder shrink it: send it without one.
    const unsized = zstdCompressSync(compressible(20 * MiB), { params: { [constants.ZSTD_c_windowLog]: 24, [constants.ZSTD_c_contentSizeFlag]: 0 } })
    expect(yield* decode(wide, share)).toBe(2 * MiB)
    expect(yield* decode(unsized, share)).toBe("Parse")
    share.release()
    expect(decodeBudgetInUse()).toBe(0)
  }))

it.effect("a body whose frame declares its size decodes into one buffer of that size, taken from the budget first; one that does not, in pieces", () =>
  Effect.gen(function*() {
    const plain = compressible(5 * MiB + 123)
    const start = decodeBudgetInUse()
    const bodyOf = (compressed: Uint8Array, share: DecodeShare) =>
      Stream.runCollect(zstdDecodedRequest(requestOf(compressed), 64 * MiB, share).stream).pipe(Effect.map((parts) => Array.from(parts)))
    const share = new DecodeShare()
    const [sized] = yield* bodyOf(zstdCompressSync(plain), share)
    expect(Buffer.from(sized!).equals(plain)).toBe(true)
    // The one buffer zstd wrote into (its size and a byte: node:zlib asks for another when one fills exactly).
    expect(sized!.buffer.byteLength).toBe(plain.length + 1)
    expect(decodeBudgetInUse() - start).toBe(plain.length)
    const [unsized] = yield* bodyOf(zstdCompressSync(plain, { params: { [constants.ZSTD_c_contentSizeFlag]: 0 } }), share)
    expect(Buffer.from(unsized!).equals(plain)).toBe(true)
    expect(decodeBudgetInUse() - start).toBe(2 * plain.length)
    share.release()
    // A declared size past the route's limit or the ratio is not allocated: the stream stops at the limit as before.
    expect(yield* decode(zstdCompressSync(plain), share, 4 * MiB)).toBe("BodyTooLarge")
    expect(yield* decode(zstdCompressSync(Buffer.alloc(RATIO_FROM + MiB)), share)).toBe("BodyTooLarge")
    share.release()
    expect(decodeBudgetInUse()).toBe(start)
  }))

/**
 * A request whose body arrives in `parts` with its `Content-Length`, as off a socket; `onPull` runs as each part is
 * asked for (its index), so a test sees what the decoder did before the rest came; `pace` ms pass before each part.
 */
const streamedRequest = (compressed: Uint8Array, sizes: ReadonlyArray<number>, onPull: (index: number) => void = () => {}, pace = 0) => {
  const parts: Array<Uint8Array> = []
  for (let at = 0, i = 0; at < compressed.length; i++) {
    const size = sizes[Math.min(i, sizes.length - 1)]!
    parts.push(compressed.slice(at, at + size))
    at += size
  }
  let next = 0
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (pace > 0) await new Promise((resolve) => setTimeout(resolve, pace))
      onPull(next)
      if (next < parts.length) controller.enqueue(parts[next++]!)
      else controller.close()
    }
  })
  const request = new Request("http://grove.test/api/o/n/chunks/batch", {
    method: "POST",
    body,
    duplex: "half",
    headers: { "content-length": String(compressed.length) }
  } as RequestInit)
  return { request: HttpServerRequest.fromWeb(request), parts, pulled: () => next }
}

it.effect("a body with a Content-Length is kept as it arrives and inflated once all of it is in, into one buffer of its declared size", () =>
  Effect.gen(function*() {
    const plain = compressible(3 * MiB + 5)
    const compressed = zstdCompressSync(plain)
    const start = decodeBudgetInUse()
    // Asked for the last part, nothing is taken yet: a body that stalls before its end holds no budget.
    let takenBeforeLast = -1
    // A first part shorter than a frame header, then socket-sized ones.
    const streamed = streamedRequest(compressed, [7, 64 * 1024], (index) => {
      if (index === streamed.parts.length - 1) takenBeforeLast = decodeBudgetInUse() - start
    })
    expect(streamed.parts.length).toBeGreaterThan(3)
    const share = new DecodeShare()
    const [bytes, ...more] = Array.from(yield* Stream.runCollect(zstdDecodedRequest(streamed.request, 64 * MiB, share).stream))
    expect(more).toEqual([])
    expect(Buffer.from(bytes!).equals(plain)).toBe(true)
    expect(takenBeforeLast).toBe(0)
    // zstd wrote every part into the one buffer: joined as a view of it, not copied.
    expect(bytes!.buffer.byteLength).toBe(plain.length + 1)
    share.release()

    // Bodies of a few bytes, and one without a declared size, decode too.
    const small = streamedRequest(zstdCompressSync(Buffer.from("tiny")), [1])
    expect(Buffer.from(yield* zstdDecodedRequest(small.request, MiB, share).arrayBuffer).toString()).toBe("tiny")
    const unsized = streamedRequest(zstdCompressSync(plain, { params: { [constants.ZSTD_c_contentSizeFlag]: 0 } }), [64 * 1024])
    expect(Buffer.from(yield* zstdDecodedRequest(unsized.request, 64 * MiB, share).arrayBuffer).equals(plain)).toBe(true)
    share.release()
    expect(decodeBudgetInUse()).toBe(start)
  }))

it.effect("a streamed body past 64x its Content-Length is refused; one past the limit or not zstd too", () =>
  Effect.gen(function*() {
    const share = new DecodeShare()
    const failure = (request: HttpServerRequest.HttpServerRequest, limit: number) =>
      zstdDecodedRequest(request, limit, share).arrayBuffer.pipe(
        Effect.flip,
        Effect.map((error) => HttpServerError.isHttpServerError(error) && error.reason._tag === "RequestParseError" ? error.reason.reason : "other")
      )
    // 64x past 4 MiB of the whole body's declared length (1 MiB: 64 MiB), without a size in its frame (else refused
    // before decoding); the frame is followed by bytes enough for a few of the decoder's writes.
    const bomb = zstdCompressSync(Buffer.alloc(128 * MiB), { params: { [constants.ZSTD_c_contentSizeFlag]: 0 } })
    const bombed = streamedRequest(Buffer.concat([bomb, Buffer.alloc(MiB - bomb.length)]), [16 * 1024])
    expect(yield* failure(bombed.request, 256 * MiB)).toBe("BodyTooLarge")
    const large = streamedRequest(zstdCompressSync(compressible(8 * MiB), { params: { [constants.ZSTD_c_contentSizeFlag]: 0 } }), [16 * 1024])
    expect(yield* failure(large.request, 2 * MiB)).toBe("BodyTooLarge")
    const garbage = streamedRequest(Buffer.alloc(MiB, 0x61), [16 * 1024])
    expect(yield* failure(garbage.request, 64 * MiB)).toBe("Parse")
    share.release()
    expect(decodeBudgetInUse()).toBe(0)
  }))

it.effect("bytes after a body's zstd frame (a second frame, junk) are refused as not valid zstd, read whole or as it arrives", () =>
  Effect.gen(function*() {
    const share = new DecodeShare()
    const reason = (request: HttpServerRequest.HttpServerRequest) =>
      zstdDecodedRequest(request, 64 * MiB, share).arrayBuffer.pipe(
        Effect.map((bytes) => Buffer.from(bytes).toString()),
        Effect.catch((error) =>
          Effect.succeed(HttpServerError.isHttpServerError(error) && error.reason._tag === "RequestParseError" ? error.reason.description : "other")
        )
      )
    const first = zstdCompressSync(Buffer.from("hello ".repeat(1000)))
    const refused = "the body is not valid zstd: bytes after its frame"
    for (const [what, body] of [["two frames", Buffer.concat([first, zstdCompressSync(Buffer.from("world"))])], ["a frame and junk", Buffer.concat([first, Buffer.from("garbage!!")])]] as const) {
      // Node's decoder took the first frame and dropped the rest: "hello " x 1000 answered for the whole body.
      expect({ what, whole: yield* reason(requestOf(body)) }).toEqual({ what, whole: refused })
      for (const sizes of [[body.length], [7, 16], [first.length - 3, 64]]) {
        expect({ what, sizes, streamed: yield* reason(streamedRequest(body, sizes).request) }).toEqual({ what, sizes, streamed: refused })
      }
    }
    expect(yield* reason(streamedRequest(first, [7, 16]).request)).toBe("hello ".repeat(1000))
    // node's one-shot compressor ends a sized body with an empty frame (9 bytes): let through, also when the body's
    // first write would have cut it (its last bytes are held for the last write).
    const sized = zstdCompressSync(compressible(5 * MiB + 123))
    expect(sized.subarray(-9).toString("hex")).toBe("28b52ffd2000010000")
    for (const sizes of [[sized.length], [sized.length - 5, 64], [64 * 1024]]) {
      const bytes = yield* zstdDecodedRequest(streamedRequest(sized, sizes).request, 64 * MiB, share).arrayBuffer
      expect({ sizes, length: bytes.byteLength }).toEqual({ sizes, length: 5 * MiB + 123 })
    }
    expect(yield* reason(streamedRequest(Buffer.concat([sized, Buffer.from("junk")]), [sized.length - 5, 64]).request)).toBe(refused)
    share.release()
    expect(decodeBudgetInUse()).toBe(0)
  }))

it.effect("discardBody frees a large decoded body's buffer at once (also through the router's modify); small ones and plain bodies are left", () =>
  Effect.gen(function*() {
    const share = new DecodeShare()
    const plain = compressible(2 * MiB)
    const request = zstdDecodedRequest(streamedRequest(zstdCompressSync(plain), [64 * 1024]).request, 64 * MiB, share).modify({ url: "/x" })
    const [bytes] = Array.from(yield* Stream.runCollect(request.stream))
    expect(Buffer.from(bytes!).equals(plain)).toBe(true)
    discardBody(request)
    expect((bytes!.buffer as ArrayBuffer).detached).toBe(true)
    expect(bytes!.length).toBe(0)
    // Read again, the body is empty, never someone else's bytes.
    expect((yield* request.arrayBuffer).byteLength).toBe(0)

    const small = zstdDecodedRequest(requestOf(zstdCompressSync(Buffer.from("small"))), MiB, share)
    const smallBytes = new Uint8Array(yield* small.arrayBuffer)
    discardBody(small)
    expect(Buffer.from(smallBytes).toString()).toBe("small")
    const raw = requestOf(plain)
    discardBody(raw)
    expect((yield* raw.arrayBuffer).byteLength).toBe(plain.length)
    share.release()
  }))

it.effect("a decoded body answers every accessor with the plain bytes, also after the router's modify", () =>
  Effect.gen(function*() {
    const form = new TextEncoder().encode("user_code=AB-CD&x=%3F")
    const share = new DecodeShare()
    const decoded = zstdDecodedRequest(requestOf(zstdCompressSync(form)), MiB, share).modify({ url: "/cli-auth" })
    expect(decoded.url).toBe("/cli-auth")
    // The form decodes from the plain bytes, not from the compressed ones the request arrived with.
    expect(UrlParams.toRecord(yield* decoded.urlParamsBody)).toEqual({ user_code: "AB-CD", x: "?" })
    expect(yield* decoded.text).toBe("user_code=AB-CD&x=%3F")
    const chunks = yield* Stream.runCollect(decoded.stream)
    expect(Buffer.concat(Array.from(chunks)).toString()).toBe("user_code=AB-CD&x=%3F")
    share.release()

    // A body read before routing: the same view; an empty JSON body is null, as the platform reads it.
    const read = bodyView(requestOf(new Uint8Array()), Effect.succeed(new TextEncoder().encode(`{"a":[1,2]}`)))
    expect(yield* read.json).toEqual({ a: [1, 2] })
    expect(new Uint8Array(yield* read.modify({ url: "/x" }).arrayBuffer)).toEqual(new TextEncoder().encode(`{"a":[1,2]}`))
    expect(yield* bodyView(requestOf(new Uint8Array()), Effect.succeed(new Uint8Array())).json).toBe(null)
  }))

it("a zstd answer adds accept-encoding to the Vary it had (the pull, a repository's or branch's JSON vary on Accept)", async () => {
  const large = JSON.stringify({ text: "x".repeat(RESPONSE_FROM) })
  const routes = Layer.mergeAll(
    HttpRouter.add("GET", "/by-accept", HttpServerResponse.text(large, { contentType: "application/json", headers: { vary: "accept" } })),
    HttpRouter.add("GET", "/plain", HttpServerResponse.text(large, { contentType: "application/json" })),
    HttpRouter.add("GET", "/pages", HttpServerResponse.text(large, { contentType: "application/json", headers: { vary: "cookie, Accept-Encoding" } })),
    ResponseCompressionLive
  )
  const { handler, dispose } = HttpRouter.toWebHandler(routes, { disableLogger: true })
  try {
    const vary = async (path: string, encoding?: string) => {
      const response = await handler(new Request(`http://localhost${path}`, { headers: encoding === undefined ? {} : { "accept-encoding": encoding } }))
      return [response.headers.get("content-encoding"), response.headers.get("vary")]
    }
    expect(await vary("/by-accept", "zstd")).toEqual(["zstd", "accept, accept-encoding"])
    expect(await vary("/by-accept")).toEqual([null, "accept"])
    expect(await vary("/plain", "zstd")).toEqual(["zstd", "accept-encoding"])
    expect(await vary("/pages", "zstd")).toEqual(["zstd", "cookie, Accept-Encoding"])
  } finally {
    await dispose()
  }
  expect(varyWith("*", "accept-encoding")).toBe("*")
  expect(varyWith(" ", "accept-encoding")).toBe("accept-encoding")
})
