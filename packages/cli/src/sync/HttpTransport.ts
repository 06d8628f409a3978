/**
 * The client's requests over `node:http` with a keep-alive agent, instead of `fetch`: loading undici (fetch's
 * implementation) was ~70 ms of a one-file push's CPU, and its first request ~30 ms slower than node:http's.
 * Answers are read whole and their `Content-Encoding` (zstd, gzip, deflate, br) decoded, as fetch did. `nodeHttpClient`
 * is the typed client's transport (Client.ts); `sendBytes` is the binary routes' (RemoteRepo.ts).
 *
 * node:http and node:https come through `process.getBuiltinModule`: an ESM import of node:http evaluates its lazy
 * WebSocket export, which loads undici. Idle keep-alive sockets are unref'd by the agent, so they never keep the
 * process alive.
 */
import { Effect } from "effect"
import { HttpClient, HttpClientError, HttpClientResponse } from "effect/http"
import type { Answer } from "./HttpSend.ts"
import { sendBytes } from "./HttpSend.ts"

export * from "./HttpSend.ts"

/**
 * The parts of a web `Response` that effect's `HttpClientResponse.fromWeb` reads (status, url, headers, the body
 * as bytes), over an answer already read: the typed client's responses without undici's `Response`.
 */
const webLike = (url: string, answer: Answer): Response => {
  const bytes = answer.body
  return {
    status: answer.status,
    ok: answer.status >= 200 && answer.status < 300,
    url,
    headers: answer.headers,
    body: null,
    arrayBuffer: () => Promise.resolve(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)),
    text: () => Promise.resolve(new TextDecoder().decode(bytes)),
    json: () => Promise.resolve(JSON.parse(new TextDecoder().decode(bytes))),
    formData: () => Promise.reject(new Error("form data answers are not read by this client"))
  } as unknown as Response
}

/** The typed client's `HttpClient` over `sendBytes`. Bodies are bytes or text (the client sends no streams or forms). */
export const nodeHttpClient: HttpClient.HttpClient = HttpClient.make((request, url, signal) => {
  const transportError = (cause: unknown, description?: string) =>
    new HttpClientError.HttpClientError({
      reason: new HttpClientError.TransportError({ request, cause, ...(description === undefined ? {} : { description }) })
    })
  const body = request.body
  if (body._tag === "Stream" || body._tag === "FormData") {
    return Effect.fail(transportError(undefined, `${body._tag} request bodies are not sent by this client`))
  }
  // node:http counts the length of a body given whole (as fetch did, a stale content-length is dropped).
  const { "content-length": _length, ...headers }: Record<string, string> = { ...request.headers }
  if (body._tag !== "Empty" && body.contentType !== undefined && body.contentType !== "" && headers["content-type"] === undefined) {
    headers["content-type"] = body.contentType
  }
  return Effect.map(
    Effect.tryPromise({
      try: () =>
        sendBytes(url, {
          method: request.method,
          headers,
          body: body._tag === "Empty" ? undefined : body.body as Uint8Array | string,
          signal
        }),
      catch: (cause) => transportError(cause)
    }),
    (answer) => HttpClientResponse.fromWeb(request, webLike(url.href.split("#")[0]!, answer))
  )
})
