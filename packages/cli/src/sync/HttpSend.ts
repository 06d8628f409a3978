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
  /**
   * How long the socket may stay silent (nothing received, nothing sent) before the request fails with ETIMEDOUT;
   * 0: no bound. Default: GROVE_IDLE_TIMEOUT (`networkTimeouts`). The time a streamed answer's consumer takes is not counted.
   */
  readonly idleTimeoutMs?: number | undefined
  /**
   * A write's (not GET, HEAD or a read sent as POST: READ_POST) wait for its answer once its body is sent: the server
   * may work on it this long (at least `idleTimeoutMs`) without a byte; 0: no bound. Default: GROVE_WRITE_TIMEOUT.
   * Reads wait `idleTimeoutMs`.
   */
  readonly writeTimeoutMs?: number | undefined
  /** How long connecting may take before the request fails with ERR_CONNECT_TIMEOUT. Default: GROVE_CONNECT_TIMEOUT. */
  readonly connectTimeoutMs?: number | undefined
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

/** The bounds on a silent server, in milliseconds (0: none). */
export interface Timeouts {
  readonly connectMs: number
  readonly idleMs: number
  readonly writeMs: number
}

/**
 * The bounds on a silent server, in seconds, from the environment: `GROVE_CONNECT_TIMEOUT` (default 10) for a
 * connection to be made, `GROVE_IDLE_TIMEOUT` (default 30) for a request or answer that moves no byte either way
 * (a long upload, download or `ci logs -f`, whose server sends a keep-alive every 15 s, keeps moving), and
 * `GROVE_WRITE_TIMEOUT` (default 300) for a write's answer once its body is sent: the server works on some writes
 * before answering and sends nothing meanwhile (a push's preparation: minutes for 50k files on a loaded server);
 * others it takes long over answer 202 within ~10 s and are polled. 0 is no bound. An error names the bad variable.
 */
export const networkTimeouts = (env: Readonly<Record<string, string | undefined>>): Timeouts | { readonly error: string } => {
  const read = (name: string, fallback: number): number | string => {
    const text = (env[name] ?? "").trim()
    if (text === "") return fallback
    const seconds = Number(text)
    return Number.isFinite(seconds) && seconds >= 0 && seconds <= 86_400
      ? Math.round(seconds * 1000)
      : `${name} must be a number of seconds up to 86400 (0: no limit), not ${JSON.stringify(env[name])}`
  }
  const connectMs = read("GROVE_CONNECT_TIMEOUT", 10_000)
  const idleMs = read("GROVE_IDLE_TIMEOUT", 30_000)
  const writeMs = read("GROVE_WRITE_TIMEOUT", 300_000)
  if (typeof connectMs === "string") return { error: connectMs }
  if (typeof idleMs === "string") return { error: idleMs }
  if (typeof writeMs === "string") return { error: writeMs }
  return { connectMs, idleMs, writeMs }
}

// Read once: the environment is checked at start (Run.ts), and reading it per request costs.
let ofProcess: Timeouts | undefined

/** The bounds for this process's requests (a bad value was refused at start, Run.ts; the quick paths take the defaults). */
export const processTimeouts = (): Timeouts => {
  if (ofProcess === undefined) {
    const timeouts = networkTimeouts(process.env)
    ofProcess = "error" in timeouts ? { connectMs: 10_000, idleMs: 30_000, writeMs: 300_000 } : timeouts
  }
  return ofProcess
}

/** The system error code of `error` or of a cause under it (fetch and the typed client wrap the socket's error). */
export const errorCode = (error: unknown): string | undefined => {
  let at = error
  for (let depth = 0; depth < 4 && typeof at === "object" && at !== null; depth++) {
    const code = (at as { code?: unknown }).code
    if (typeof code === "string") return code
    at = (at as { cause?: unknown }).cause
  }
  return undefined
}

/** Whether a request failed on a bound of this file: the server did not connect or went silent. */
export const isTimeout = (error: unknown): boolean => {
  const code = errorCode(error)
  return code === "ETIMEDOUT" || code === "ERR_CONNECT_TIMEOUT"
}

/** A body is written in parts of this size, so each part's write counts as movement for the idle bound. */
const BODY_PART = 256 * 1024

/**
 * Once a body is written, up to this much of it may still be in the kernel's buffers (send and receive, ~10 MiB at
 * most) going out at a slow link's pace, unseen here: the wait for the answer allows it this long at 128 KiB/s too.
 */
const drainAllowanceMs = (bodyBytes: number) => Math.min(bodyBytes, 16 * 1024 * 1024) / (128 * 1024) * 1000

/**
 * POSTs that are reads: the server answers after one lookup, as it does a GET, so their silence is bounded by the idle
 * bound (a clone's stalled chunks/fetch waited GROVE_WRITE_TIMEOUT). Told by the path: the typed client's requests
 * carry no option of their own. Not blobs/check (it may re-hash blobs) nor chunks/check: a push's steps.
 */
const READ_POST = /\/(?:chunks\/fetch|blobs\/info|commits\/info)$/

/** A timeout as its messages say it ("2.5 s"). */
export const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`

/** An Error carrying a node-style `code`, as the transports' failures are told by (networkFailure). */
export const failure = (message: string, code: string): Error => Object.assign(new Error(message), { code })

/** The error of a request whose server sent nothing for `ms` (ETIMEDOUT), naming the variable that bounds the wait. */
export const wentSilent = (ms: number, variable = "GROVE_IDLE_TIMEOUT"): Error =>
  failure(`the server went silent for ${seconds(ms)} (set ${variable} to wait longer)`, "ETIMEDOUT")

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
 * ECONNRESET, is what Retry.ts looks at) when no answer came, with ERR_CONNECT_TIMEOUT when no connection is made
 * within `connectTimeoutMs`, with ETIMEDOUT when the socket stays silent for `idleTimeoutMs` (a write's answer, once
 * its body is sent: `writeTimeoutMs`), and with
 * ERR_ANSWER_TOO_LARGE past `maxBytes` (on the wire or decoded). Every error it rejects with carries `connected`: whether
 * the connection was made (or a kept-alive one reused) before it failed ("cannot connect" only if not: Failures.ts).
 */
export const sendBytes = (url: URL | string, init: SendInit): Promise<Answer> =>
  new Promise<Answer>((resolve, rejectWith) => {
    let connected = false
    const reject = (error: unknown) =>
      rejectWith(typeof error === "object" && error !== null ? Object.assign(error, { connected }) : error)
    const target = typeof url === "string" ? new URL(url) : url
    const { agent, module } = moduleFor(target)
    const maxBytes = init.maxBytes ?? MAX_ANSWER_BYTES
    const timeouts = init.idleTimeoutMs === undefined || init.connectTimeoutMs === undefined || init.writeTimeoutMs === undefined
      ? processTimeouts()
      : undefined
    const idleMs = init.idleTimeoutMs ?? timeouts!.idleMs
    const connectMs = init.connectTimeoutMs ?? timeouts!.connectMs
    const writeMs = init.writeTimeoutMs ?? timeouts!.writeMs
    const isWrite = init.method !== "GET" && init.method !== "HEAD" && !READ_POST.test(target.pathname)
    // A write's wait for its answer once its body is sent, where longer than idleMs.
    const writeWaitMs = isWrite && idleMs > 0 && (writeMs === 0 || writeMs > idleMs) ? writeMs : undefined
    // What the timer allows, the body sent and its answer awaited: idleMs, plus a body's drain allowance, or writeWaitMs.
    let timerFor: "idle" | "drain" | "write" = "idle"
    let answered = false
    const body = typeof init.body === "string" && init.body.length > BODY_PART ? Buffer.from(init.body) : init.body
    // A body sent in parts carries its length: node would send it chunked otherwise.
    const inParts = body !== undefined && typeof body !== "string" && body.length > BODY_PART
    const request = module.request(target, {
      agent,
      method: init.method,
      headers: inParts ? { ...init.headers, "content-length": String(body.length) } : init.headers,
      ...(init.signal === undefined ? {} : { signal: init.signal })
    }, (response) => {
      answered = true
      if (timerFor !== "idle") {
        timerFor = "idle"
        request.socket?.setTimeout(idleMs)
      }
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
          // The consumer's time (a slow disk) is not the server's silence.
          request.socket?.setTimeout(0)
          waiting = wait.then(() => {
            waiting = undefined
            request.socket?.setTimeout(idleMs)
            response.resume()
          }, fail)
        } catch (error) {
          fail(error)
        }
      })
      // Also a connection closed within the answer (ECONNRESET): never taken for a whole, shorter body. Node calls it
      // "aborted"; the message says what happened.
      response.on("error", (error: Error & { code?: string }) =>
        reject(
          error.message === "aborted"
            ? failure(`the connection broke within the server's answer, ${received} bytes in`, error.code ?? "ECONNRESET")
            : error
        ))
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
    if (idleMs > 0) {
      const onTimeout = () => {
        // The body sent and no answer yet: a write's answer may take the server longer (it answers after its work, a
        // push's preparation for minutes), so the silence so far counts into writeWaitMs. Nothing to do per request.
        const socket = request.socket
        if (writeWaitMs !== undefined && timerFor !== "write" && !answered && request.writableFinished && socket !== null) {
          timerFor = "write"
          // node passes a socket's timeout on to its request once: the timer's next end is heard on the socket.
          socket.once("timeout", onTimeout)
          request.once("close", () => socket.off("timeout", onTimeout))
          return void socket.setTimeout(writeWaitMs === 0 ? 0 : writeWaitMs - idleMs)
        }
        request.destroy(
          timerFor === "write"
            ? failure(`the server sent no answer for ${seconds(writeWaitMs!)} after the request (set GROVE_WRITE_TIMEOUT to wait longer)`, "ETIMEDOUT")
            : wentSilent(idleMs)
        )
      }
      request.setTimeout(idleMs, onTimeout)
    }
    request.once("socket", (socket) => {
      // A reused keep-alive socket is connected; a new one once connected (and, for https, its TLS handshake done).
      if (!socket.connecting) return void (connected = true)
      const timer = connectMs > 0
        ? setTimeout(() =>
          request.destroy(
            failure(`no connection after ${seconds(connectMs)} (set GROVE_CONNECT_TIMEOUT to wait longer)`, "ERR_CONNECT_TIMEOUT")
          ), connectMs)
        : undefined
      socket.once("connect", () => clearTimeout(timer))
      socket.once("close", () => clearTimeout(timer))
      socket.once("encrypted" in socket ? "secureConnect" : "connect", () => void (connected = true))
    })
    request.on("error", (error: Error & { code?: string }) =>
      reject(
        error.message === "socket hang up" ? failure("the server closed the connection without answering", error.code ?? "ECONNRESET") : error
      ))
    if (!inParts) return void request.end(body)
    if (idleMs > 0) {
      request.once("finish", () => {
        if (answered) return
        timerFor = "drain"
        request.socket?.setTimeout(idleMs + drainAllowanceMs(body.length))
      })
    }
    let offset = 0
    const next = () => {
      while (offset < body.length) {
        const part = body.subarray(offset, offset += BODY_PART)
        if (!request.write(part)) return void request.once("drain", next)
      }
      request.end()
    }
    next()
  })
