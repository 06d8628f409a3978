/**
 * One request over `node:http` (or node:https) with a keep-alive agent, its answer read whole and decoded or taken
 * part by part: the transport under the typed client (HttpTransport.ts) and the binary routes. No Effect here, so the
 * small push (cli SmallPush.ts) sends with it before the client loads. See HttpTransport.ts for why not fetch.
 */
import type * as Http from "node:http"

export interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The body, decoded. */
  readonly body: Uint8Array
}

export interface SendInit {
  readonly method: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: Uint8Array | string | undefined
  readonly signal?: AbortSignal | undefined
  /** Bytes an answer may have, on the wire and decoded (a small compressed answer can decode to gigabytes). */
  readonly maxBytes?: number | undefined
  /** How long the socket may stay silent before the request fails with ETIMEDOUT (fetch gave up after 300 s). */
  readonly idleTimeoutMs?: number | undefined
  /**
   * Takes the body part by part as it arrives instead of whole (the answer's `body` is then empty), when it returns a
   * consumer for this answer's status and headers. A consumer that returns a promise pauses the answer until it
   * settles; one that throws (or rejects) fails the request. `done` runs at the end, after the last part is taken.
   */
  readonly stream?: ((status: number, headers: Readonly<Record<string, string>>) => BodyConsumer | undefined) | undefined
}

export interface BodyConsumer {
  readonly part: (part: Buffer) => Promise<void> | undefined
  readonly done: () => void
}

/** What an answer may hold unless the caller says otherwise: twice the server's own request body bound. */
export const MAX_ANSWER_BYTES = 512 * 1024 * 1024
export const IDLE_TIMEOUT_MS = 300_000

const failure = (message: string, code: string): Error => Object.assign(new Error(message), { code })

type HttpModule = typeof Http
let agents: { readonly http: Http.Agent; readonly https: Http.Agent } | undefined

const moduleFor = (url: URL): { readonly module: HttpModule; readonly agent: Http.Agent } => {
  const http = process.getBuiltinModule("node:http") as HttpModule
  agents ??= { http: new http.Agent({ keepAlive: true }), https: undefined as unknown as Http.Agent }
  if (url.protocol !== "https:") return { module: http, agent: agents.http }
  const https = process.getBuiltinModule("node:https") as unknown as HttpModule
  agents = { ...agents, https: agents.https ?? new https.Agent({ keepAlive: true }) }
  return { module: https, agent: agents.https }
}

const decode = (encoding: string | undefined, body: Buffer, maxOutputLength: number): Promise<Uint8Array> => {
  // Loaded only for an encoded answer: most answers are plain, and loading node:zlib costs ~2 ms of a short run.
  const zlib = () => process.getBuiltinModule("node:zlib")
  const bounded = { maxOutputLength }
  const run = (f: (input: Buffer, done: (error: Error | null, out: Buffer) => void) => void) =>
    new Promise<Uint8Array>((resolve, reject) =>
      f(body, (error, out) =>
        error === null
          ? resolve(out)
          : reject((error as Error & { code?: string }).code === "ERR_BUFFER_TOO_LARGE"
            ? failure(`the server's answer decodes to more than ${maxOutputLength} bytes`, "ERR_ANSWER_TOO_LARGE")
            : error)))
  switch ((encoding ?? "identity").trim().toLowerCase()) {
    case "identity":
    case "":
      return Promise.resolve(body)
    case "zstd":
      return run((input, done) => zlib().zstdDecompress(input, bounded, done))
    case "gzip":
    case "x-gzip":
      return run((input, done) => zlib().gunzip(input, bounded, done))
    case "deflate":
      return run((input, done) => zlib().inflate(input, bounded, done))
    case "br":
      return run((input, done) => zlib().brotliDecompress(input, bounded, done))
    default:
      return Promise.reject(new Error(`unsupported content-encoding ${encoding}`))
  }
}

const flatHeaders = (headers: Http.IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

/**
 * One request, its answer read whole (or streamed to `init.stream`'s consumer). Rejects with the socket's error (its `code`, e.g. ECONNREFUSED or
 * ECONNRESET, is what Retry.ts looks at) when no answer came, with ETIMEDOUT when the socket stays silent for
 * `idleTimeoutMs`, and with ERR_ANSWER_TOO_LARGE past `maxBytes` (on the wire or decoded).
 */
export const sendBytes = (url: URL | string, init: SendInit): Promise<Answer> =>
  new Promise<Answer>((resolve, reject) => {
    const target = typeof url === "string" ? new URL(url) : url
    const { agent, module } = moduleFor(target)
    const maxBytes = init.maxBytes ?? MAX_ANSWER_BYTES
    const request = module.request(target, {
      agent,
      method: init.method,
      headers: init.headers,
      ...(init.signal === undefined ? {} : { signal: init.signal })
    }, (response) => {
      const parts: Array<Buffer> = []
      let received = 0
      const headers = flatHeaders(response.headers)
      // A streamed body is taken as sent: an encoded one is read whole and decoded.
      const consumer = headers["content-encoding"] === undefined ? init.stream?.(response.statusCode ?? 0, headers) : undefined
      let waiting: Promise<void> | undefined
      const fail = (error: unknown) => {
        const cause = error instanceof Error ? error : new Error(String(error))
        reject(cause)
        request.destroy(cause)
      }
      response.on("data", (part: Buffer) => {
        received += part.length
        if (received > maxBytes) {
          request.destroy(failure(`the server's answer is larger than ${maxBytes} bytes`, "ERR_ANSWER_TOO_LARGE"))
          return
        }
        if (consumer === undefined) {
          parts.push(part)
          return
        }
        try {
          const wait = consumer.part(part)
          if (wait === undefined) return
          response.pause()
          waiting = wait.then(() => {
            waiting = undefined
            response.resume()
          }, fail)
        } catch (error) {
          fail(error)
        }
      })
      // Also a connection closed within the answer (ECONNRESET): never taken for a whole, shorter body.
      response.on("error", reject)
      response.on("end", () => {
        if (consumer !== undefined) {
          Promise.resolve(waiting).then(() => {
            consumer.done()
            resolve({ status: response.statusCode ?? 0, headers, body: new Uint8Array(0) })
          }).catch(fail)
          return
        }
        decode(headers["content-encoding"], parts.length === 1 ? parts[0]! : Buffer.concat(parts), maxBytes).then(
          (body) => resolve({ status: response.statusCode ?? 0, headers, body }),
          reject
        )
      })
    })
    request.setTimeout(init.idleTimeoutMs ?? IDLE_TIMEOUT_MS, () =>
      request.destroy(failure(`no answer from ${target.host} for ${Math.round((init.idleTimeoutMs ?? IDLE_TIMEOUT_MS) / 1000)} s`, "ETIMEDOUT")))
    request.on("error", reject)
    request.end(init.body)
  })
