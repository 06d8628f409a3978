/**
 * Whatever goes wrong, the caller gets `{ error, code? }` JSON with the right
 * status: unknown routes (404), bodies that cannot be read (400/413), a path
 * segment longer than any parameter (400), an unreachable dependency that no
 * handler mapped (503, retryable), and defects (500, logged with their cause,
 * never echoed).
 */
import { ApiParams } from "@grove/api"
import { CommandFailures } from "@grove/bus"
import { Cause, Effect } from "effect"
import { HttpRouter, HttpServerError, type HttpServerResponse } from "effect/http"
import { HttpServerResponse as Response } from "effect/http"

const messages: Record<number, readonly [string, string]> = {
  400: ["bad request", "invalid_request"],
  401: ["sign in required", "unauthenticated"],
  403: ["forbidden", "forbidden"],
  404: ["not found", "not_found"],
  405: ["method not allowed", "method_not_allowed"],
  408: ["request timeout", "timeout"],
  413: ["request body too large", "payload_too_large"],
  415: ["unsupported content type", "unsupported_media_type"],
  499: ["client closed the request", "client_closed"],
  500: ["internal server error", "internal"],
  503: ["temporarily unavailable", "unavailable"]
}

export const jsonError = (status: number, headers?: HttpServerResponse.HttpServerResponse["headers"]) => {
  const [error, code] = messages[status] ?? (status >= 500 ? messages[500]! : messages[400]!)
  const response = Response.jsonUnsafe(status === 503 ? { error, code, retryable: true } : { error, code }, { status })
  return headers === undefined ? response : Response.setHeaders(response, headers)
}

/** An error without a body, or with a plain-text one (the framework's 415), becomes the JSON error of its status. */
const fillEmpty = (response: HttpServerResponse.HttpServerResponse) =>
  response.status >= 400 && (response.body._tag === "Empty" || (response.status === 415 && String(response.body.contentType).startsWith("text/")))
    ? jsonError(response.status)
    : response

/** Failures of the object store or the bus: the server's trouble, worth a retry. */
const DEPENDENCY_FAILURES = new Set(["ObjectStoreError", "BusError"])

/**
 * A dependency that could not be reached, in a failure or a defect no handler mapped: a database
 * error that may pass (connection lost, the database shutting down or starting, timeouts, serialization), or a failure of the
 * object store or the bus. A database error that no retry can fix (bad SQL, a constraint) stays a 500.
 */
const dependencyFailure = (cause: Cause.Cause<unknown>): { readonly _tag: string } | undefined => {
  for (const reason of cause.reasons) {
    const value: unknown = Cause.isFailReason(reason) ? reason.error : Cause.isDieReason(reason) ? reason.defect : undefined
    if (typeof value !== "object" || value === null) continue
    const { _tag } = value as { readonly _tag?: unknown }
    if (CommandFailures.isTransientSqlError(value) || DEPENDENCY_FAILURES.has(String(_tag))) return value as { readonly _tag: string }
  }
  return undefined
}

/** The router found no route because a path segment is longer than any parameter can be: the caller's mistake. */
const segmentTooLong = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) => {
    if (!Cause.isFailReason(reason) || !HttpServerError.isHttpServerError(reason.error)) return false
    const inner = reason.error.reason
    return inner._tag === "RouteNotFound" && inner.description?.startsWith("path parameter is longer than") === true
  })

// The router's types insist a global middleware leaves errors it was not configured for
// unhandled; this one deliberately answers every failure, hence the widening cast.
export const JsonErrorsLive = HttpRouter.middleware((httpEffect) =>
  (httpEffect as Effect.Effect<HttpServerResponse.HttpServerResponse, unknown>).pipe(
    Effect.map(fillEmpty),
    Effect.catchCause((cause) =>
      Effect.gen(function*() {
        const dependency = dependencyFailure(cause)
        if (dependency !== undefined) {
          yield* Effect.logWarning(`dependency unavailable (${dependency._tag}): answered 503`)
          return jsonError(503)
        }
        if (segmentTooLong(cause)) {
          return Response.jsonUnsafe({
            error: `invalid path: a path segment must be at most ${ApiParams.MAX_SEGMENT} characters`,
            code: "invalid_input"
          }, { status: 400 })
        }
        const [response] = yield* HttpServerError.causeResponse(cause)
        if (response.status >= 500 && response.status !== 503) yield* Effect.logError("request failed", cause)
        return fillEmpty(response)
      })
    )
  ) as typeof httpEffect, { global: true })
