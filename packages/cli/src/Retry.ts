/**
 * What the client tries again by itself: requests the server never took. A node that restarts
 * (a rolling upgrade, a drain) refuses connections for a moment or answers 503 while it is not ready;
 * neither acted on the request, so any request may be sent again. A connection that broke after the
 * request went out is tried again only when sending twice is safe: GET, HEAD and PUT (content-addressed
 * uploads), and writes that carry an Idempotency-Key. Bounded: five tries over about 1.5 seconds. A timeout
 * (sync/HttpSend.ts: no connection, or a server gone silent) is tried again once, by the same rule (a connection never
 * made took nothing): a second one is the answer, not five times the wait (a stale kept-alive socket is the case the
 * one more try is for).
 */
import { Duration, Effect } from "effect"
import type { HttpClientRequest } from "effect/http"
import { HttpClient, HttpClientError } from "effect/http"
import { errorCode, isTimeout } from "./sync/HttpSend.ts"

/** The pauses before each try after the first. */
export const PAUSES: ReadonlyArray<Duration.Input> = ["100 millis", "200 millis", "400 millis", "800 millis"]

/** Longest wait a 503's `Retry-After` may ask for here; past it the 503 is the answer. */
const MAX_RETRY_AFTER = Duration.seconds(2)

/** The system error code under a transport failure (ECONNREFUSED, ECONNRESET, ETIMEDOUT, ERR_CONNECT_TIMEOUT...). */
const codeOf = (error: HttpClientError.HttpClientError): string | undefined =>
  error.reason._tag === "TransportError" ? errorCode(error.reason.cause) : undefined

const safeTwice = (request: HttpClientRequest.HttpClientRequest) =>
  request.method === "GET" || request.method === "HEAD" || request.method === "PUT" ||
  request.headers["idempotency-key"] !== undefined

/** Whether a failed try may be made again: nothing reached the server, or sending twice is safe. */
export const retryableError = (error: HttpClientError.HttpClientError, request: HttpClientRequest.HttpClientRequest) => {
  if (error.reason._tag !== "TransportError") return false
  const code = codeOf(error)
  return code === "ECONNREFUSED" || code === "ERR_CONNECT_TIMEOUT" || safeTwice(request)
}

/** Whether the failed try was a timeout (then it is tried again once at most). */
export const timedOut = (error: HttpClientError.HttpClientError): boolean =>
  error.reason._tag === "TransportError" && isTimeout(error.reason.cause)

/**
 * The pause before trying again after an answer on try `attempt` (from 0): only a 503, the pause it asks for (never
 * less than the usual one), none past the limit (then the 503 is the answer) and none after the last try. Shared
 * with the binary routes (sync/RemoteRepo.ts).
 */
export const pauseAfterAnswer = (attempt: number, status: number, retryAfter: string | undefined): Duration.Duration | undefined => {
  if (status !== 503 || attempt >= PAUSES.length) return undefined
  const seconds = retryAfter === undefined ? 0 : Number(retryAfter)
  const asked = Number.isFinite(seconds) && seconds > 0 ? Duration.seconds(seconds) : Duration.zero
  return Duration.isGreaterThan(asked, MAX_RETRY_AFTER) ? undefined : Duration.max(asked, Duration.fromInputUnsafe(PAUSES[attempt]!))
}

/** The client, trying again what the server never took (see above). */
export const retryUntaken = <E, R>(client: HttpClient.HttpClient.With<E, R>) =>
  HttpClient.transform(client, (send, request) =>
    Effect.gen(function*() {
      let timeouts = 0
      for (let attempt = 0;; attempt++) {
        const result = yield* Effect.result(send)
        if (result._tag === "Success") {
          const wait = pauseAfterAnswer(attempt, result.success.status, result.success.headers["retry-after"])
          if (wait === undefined) return result.success
          yield* Effect.sleep(wait)
          continue
        }
        const error = result.failure
        const again = attempt < PAUSES.length && HttpClientError.isHttpClientError(error) && retryableError(error, request) &&
          (!timedOut(error) || ++timeouts <= 1)
        if (!again) return yield* Effect.fail(error)
        yield* Effect.sleep(PAUSES[attempt]!)
      }
    }))
