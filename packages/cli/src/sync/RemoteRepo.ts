/**
 * One repository on one server, as the transfer code talks to it: the typed
 * client for the JSON endpoints and plain requests for the binary chunk routes
 * (`chunks/batch`, `chunks/fetch`), which are outside the HttpApi contract.
 */
import { Duration, Effect, Option } from "effect"
import type { Connection } from "../Client.ts"
import { connect, fromErrorBody } from "../Client.ts"
import type { CliFailure } from "../Failures.ts"
import { CliFailure as Failure, ExitCode, networkFailure } from "../Failures.ts"
import { PAUSES, pauseAfterAnswer } from "../Retry.ts"
import type { Answer, SendInit } from "./HttpTransport.ts"
import { compressionMode } from "./BodyCompression.ts"
import { isTimeout, processTimeouts, sendBytes, wentSilent } from "./HttpTransport.ts"
import { sendStreamed, streamsOverSocket } from "./StreamSocket.ts"

export interface BinaryInit {
  readonly method: string
  readonly body?: string | Uint8Array
  readonly contentType?: string
  readonly contentEncoding?: string
  /** The answer's encodings this request accepts (a large JSON answer comes zstd from a remote server). */
  readonly acceptEncoding?: string | undefined
  /** The answer's media types this request accepts (a pull takes the compact answer: core's CompactPull). */
  readonly accept?: string | undefined
}

export interface RemoteRepo {
  readonly site: string
  readonly owner: string
  readonly name: string
  readonly connection: Connection
  readonly token: string | undefined
  /** `{site}/api/{owner}/{name}/{path}` with the bearer token, answered as a streaming `fetch` response; a non-2xx answer is a failure. */
  readonly binary: (path: string, init: BinaryInit) => Promise<Response>
  /**
   * The same request over node:http (sync/HttpTransport.ts), without loading fetch: its answer read whole (an upload's
   * `chunks/batch`), or a 2xx answer's body taken part by part by `stream`'s consumer (`chunks/fetch`). A streamed
   * answer whose connection breaks after some of it was taken is asked again through `resume` (see `StreamedInit`).
   */
  readonly sendBinary: (path: string, init: StreamedInit) => Promise<Answer>
}

export interface StreamedInit extends BinaryInit {
  readonly stream?: SendInit["stream"]
  /**
   * After the connection broke within a streamed answer (not a refusal: the consumer's own failures fail at once): the
   * request for what was not taken yet, or undefined when everything was. Sent under the same retry budget. Without
   * it, such a break fails the request (sending the same request again would hand the same bytes over twice).
   */
  readonly resume?: (() => Promise<BinaryInit | undefined>) | undefined
  /** Aborts the request (and any try after it). */
  readonly signal?: AbortSignal | undefined
  /** A 503 fails at once instead of being tried again after a pause: the caller has another way to send it. */
  readonly busyFailsAtOnce?: boolean | undefined
  /** The answer of this very request sent already (PullAhead.ts): taken as the first try's. */
  readonly sent?: Promise<Answer> | undefined
}

const encodeSegment = encodeURIComponent

/** Waits `ms`, or less when `signal` aborts. */
const pause = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => {
    const stop = () => {
      clearTimeout(timer)
      resolve()
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", stop)
      resolve()
    }, ms)
    signal?.addEventListener("abort", stop, { once: true })
  })

/** The pauses before each try after the first (as `Retry.ts` for the typed client). */
const RETRY_PAUSES_MS = PAUSES.map((pause) => Duration.toMillis(Duration.fromInputUnsafe(pause)))

/**
 * `send`'s answer (its status and headers) within `idleMs` (GROVE_IDLE_TIMEOUT, sync/HttpSend.ts), else it is aborted
 * with ETIMEDOUT as sendBytes' requests are: fetch's own bound is 300 s. The body is read after, unbounded here.
 */
export const headersWithin = (
  idleMs: number,
  send: (signal: AbortSignal | null) => Promise<Response>,
  variable = "GROVE_IDLE_TIMEOUT"
): Promise<Response> => {
  if (idleMs === 0) return send(null)
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(wentSilent(idleMs, variable)), idleMs)
  return send(controller.signal).finally(() => clearTimeout(timer))
}

export const repoRemote = (connection: Connection, owner: string, name: string): RemoteRepo => {
  const token = Option.getOrUndefined(Option.map(connection.credential, (c) => c.token))
  const base = `${connection.remote}/api/${encodeSegment(owner)}/${encodeSegment(name)}`
  const headersOf = (init: BinaryInit) => {
    const headers: Record<string, string> = {}
    if (token !== undefined) headers["authorization"] = `Bearer ${token}`
    if (init.contentType !== undefined) headers["content-type"] = init.contentType
    if (init.contentEncoding !== undefined) headers["content-encoding"] = init.contentEncoding
    if (init.acceptEncoding !== undefined) headers["accept-encoding"] = init.acceptEncoding
    if (init.accept !== undefined) headers["accept"] = init.accept
    return headers
  }
  // Every binary route may be sent twice (a GET, or chunks by their hash): a connection lost before any
  // byte of the answer (a keep-alive socket the server closed as the request went out) is tried again, and
  // a 503 as the typed client tries it again (Retry.ts: a draining or busy node did not act on the request).
  const withRetry = async <A>(
    send: () => Promise<A>,
    statusOf: (answer: A) => readonly [status: number, retryAfter: string | undefined],
    { busyFailsAtOnce = false, discard, retryable = () => true, signal }: {
      readonly busyFailsAtOnce?: boolean
      /** Whether a thrown try may be made again. */
      readonly retryable?: () => boolean
      readonly signal?: AbortSignal | undefined
      /** Lets go of an answer that is not taken (a 503 tried again). */
      readonly discard?: (answer: A) => void
    } = {}
  ): Promise<A> => {
    let timeouts = 0
    for (let attempt = 0;; attempt++) {
      let answer: A
      try {
        answer = await send()
      } catch (error) {
        // The consumer refused the answer, or part of it was taken and cannot be asked again, or the caller stopped it.
        if (!retryable() || signal?.aborted === true) throw error
        // A bomb is not a network hiccup: sending again would only download it again.
        if ((error as { code?: unknown }).code === "ERR_ANSWER_TOO_LARGE") {
          throw new Failure({ message: `${connection.remote}: ${(error as Error).message}`, exitCode: ExitCode.auth, code: "answer_too_large" })
        }
        // A timeout is tried again once (Retry.ts): not five times the wait on a silent server.
        if (attempt >= RETRY_PAUSES_MS.length || (isTimeout(error) && ++timeouts > 1)) {
          throw networkFailure(connection.remote, error)
        }
        await pause(RETRY_PAUSES_MS[attempt]!, signal)
        continue
      }
      const [status, retryAfter] = statusOf(answer)
      const wait = signal?.aborted === true || (status === 503 && busyFailsAtOnce) ? undefined : pauseAfterAnswer(attempt, status, retryAfter)
      if (wait === undefined) return answer
      discard?.(answer)
      await pause(Duration.toMillis(wait), signal)
    }
  }
  const refused = (status: number, body: unknown) =>
    fromErrorBody(status, typeof body === "object" && body !== null ? body as Record<string, unknown> : {}, connection)
  return {
    site: connection.remote,
    owner,
    name,
    connection,
    token,
    binary: async (path, init) => {
      const headers = headersOf(init)
      const response = await withRetry(
        () =>
          headersWithin(processTimeouts().idleMs, (signal) =>
            fetch(`${base}/${path}`, {
              method: init.method,
              headers,
              signal,
              ...(init.body === undefined ? {} : { body: init.body as string } as RequestInit)
            })),
        (answer) => [answer.status, answer.headers.get("retry-after") ?? undefined],
        { discard: (answer) => void answer.body?.cancel().catch(() => undefined) }
      )
      if (!response.ok) throw refused(response.status, await response.json().catch(() => ({})))
      return response
    },
    sendBinary: async (path, init) => {
      let ask: BinaryInit = init
      /** The status and headers of an answer this try's consumer takes (then it is not sent again as it was). */
      let taken: { readonly status: number; readonly headers: Readonly<Record<string, string>> } | undefined
      /** The consumer's own failure (a bad chunk, a failed write): never a network hiccup, never tried again. */
      let rejected = false
      const refusing = (error: unknown): never => {
        rejected = true
        throw error
      }
      const consume = init.stream
      const stream: SendInit["stream"] = consume === undefined ? undefined : (status, headers) => {
        if (status < 200 || status >= 300) return undefined
        const consumer = consume(status, headers)
        if (consumer === undefined) return undefined
        taken = { status, headers }
        return {
          part: (part) => {
            try {
              return consumer.part(part)?.catch(refusing)
            } catch (error) {
              return refusing(error)
            }
          },
          done: () => {
            try {
              consumer.done()
            } catch (error) {
              refusing(error)
            }
          }
        }
      }
      let sent = init.sent
      const send = async (): Promise<Answer> => {
        if (sent !== undefined) {
          const first = sent
          sent = undefined
          return first
        }
        if (taken !== undefined && init.resume !== undefined) {
          const seen = taken
          taken = undefined
          const next = await init.resume().catch(refusing)
          if (next === undefined) return { ...seen, body: new Uint8Array(0) }
          ask = next
        }
        // A streamed answer (chunks) from an http:// server is read off a plain socket (StreamSocket.ts).
        const transport = stream !== undefined && streamsOverSocket(base) ? sendStreamed : sendBytes
        return transport(`${base}/${path}`, { method: ask.method, headers: headersOf(ask), body: ask.body, stream, signal: init.signal })
      }
      const answer = await withRetry(
        send,
        (answer) => [answer.status, answer.headers["retry-after"]],
        {
          retryable: () => !rejected && (taken === undefined || init.resume !== undefined),
          signal: init.signal,
          busyFailsAtOnce: init.busyFailsAtOnce === true
        }
      )
      if (answer.status < 200 || answer.status >= 300) {
        let body: unknown
        try {
          body = JSON.parse(new TextDecoder().decode(answer.body))
        } catch {
          body = {}
        }
        throw refused(answer.status, body)
      }
      return answer
    }
  }
}

/**
 * Uploads go zstd-compressed when the server takes it, as git's packs do (the pushing client pays the CPU).
 * `GROVE_CHUNK_COMPRESSION=off` sends raw bytes.
 */
export const uploadCompression = (): boolean => compressionMode() !== "off"

/** `GROVE_CHUNK_FRAMES=hashed` sends and asks for the protocol's hashed frames (to compare, or to test that path). */
export const bareFrames = (): boolean => process.env["GROVE_CHUNK_FRAMES"] !== "hashed"

export const connectRepo = (site: string, owner: string, name: string): Effect.Effect<RemoteRepo, CliFailure, Effect.Services<ReturnType<typeof connect>>> =>
  Effect.map(connect(site), (connection) => repoRemote(connection, owner, name))

/** A promise-based transfer step: a thrown `CliFailure` stays itself, anything else becomes one. */
const transferFailure = (what: string, error: unknown): CliFailure =>
  error instanceof Failure
    ? error
    : new Failure({
      message: `${what}: ${error instanceof Error ? error.message : String(error)}`,
      exitCode: ExitCode.error,
      code: "transfer"
    })

export const transfer = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, CliFailure> =>
  Effect.tryPromise({ try: run, catch: (error) => transferFailure(what, error) })

/**
 * As `transfer`, for work that writes files: an interruption aborts `signal` and waits until `run` has ended, so none
 * of its writes lands after the interrupted fiber (and whoever removes those files next) has moved on.
 */
export const stoppableTransfer = <A>(what: string, run: (signal: AbortSignal) => Promise<A>): Effect.Effect<A, CliFailure> =>
  Effect.callback<A, CliFailure>((resume) => {
    const controller = new AbortController()
    const running = run(controller.signal)
    running.then((value) => resume(Effect.succeed(value)), (error) => resume(Effect.fail(transferFailure(what, error))))
    return Effect.promise(() => {
      controller.abort()
      return running.then(() => undefined, () => undefined)
    })
  })
