/**
 * Plumbing for the routes outside the JSON contract (binary bodies and
 * streamed responses): the caller and the repository behind a request, and
 * API errors as JSON responses.
 */
import { ApiErrors, ApiParams, type Caller } from "@grove/api"
import type { Access } from "@grove/core"
import { Effect, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Authorizer } from "../access/Authorizer.ts"
import { Identity } from "../access/Identity.ts"
import { callerOf } from "./Authentication.ts"
import { isBodyTooLarge } from "./ContentEncoding.ts"
import { dbUnavailable } from "./Failures.ts"
import { routeParams } from "./PathParams.ts"

/** The API errors a route outside the JSON contract (or a page) answers with. */
export type AnyApiError =
  | ApiErrors.BadRequest
  | ApiErrors.Unauthorized
  | ApiErrors.Forbidden
  | ApiErrors.NotFound
  | ApiErrors.Conflict
  | ApiErrors.PayloadTooLarge
  | ApiErrors.ServiceUnavailable

export const statusOf = (error: AnyApiError): number =>
  error instanceof ApiErrors.BadRequest
    ? 400
    : error instanceof ApiErrors.Unauthorized
    ? 401
    : error instanceof ApiErrors.Forbidden
    ? 403
    : error instanceof ApiErrors.NotFound
    ? 404
    : error instanceof ApiErrors.Conflict
    ? 409
    : error instanceof ApiErrors.PayloadTooLarge
    ? 413
    : 503

/** The error's own body (`{error, code?, retryable?, ...}`) with its status. */
export const errorResponse = (error: AnyApiError, headers: Record<string, string> = {}) => {
  const { _tag: _, ...body } = error as unknown as Record<string, unknown>
  return HttpServerResponse.jsonUnsafe(body, { status: statusOf(error), headers })
}

/** Runs a raw route, answering its API errors as JSON. */
export const answer = <E extends AnyApiError, R>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.catch(effect, (error: E) => Effect.succeed(errorResponse(error)))

export const requestCaller = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const identity = yield* Identity
  return yield* callerOf(identity, request.headers["authorization"])
})

export const ownerRepo = routeParams(ApiParams.OwnerRepo)

/**
 * The route's `owner` and `name`, authorized for `action`. Both are checked before the token
 * lookup; a route with other parameters checks them (with `routeParams`) before calling this.
 */
export const routeRepository = (action: Access.Action, caller?: Caller) =>
  Effect.gen(function*() {
    yield* ownerRepo
    const params = yield* HttpRouter.params
    const who = caller ?? (yield* requestCaller)
    const authorizer = yield* Authorizer
    const repo = yield* dbUnavailable(authorizer.repository(who, params.owner ?? "", params.name ?? "", action))
    return { repo, caller: who, params }
  })

/**
 * The request body, failing with 413 past `maxBytes`. Bodies of the chunk routes are one chunk
 * (or one batch) at most, which the protocol allows in memory.
 */
export const readBody = (maxBytes: number) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const declared = Number(request.headers["content-length"] ?? NaN)
    const tooLarge = new ApiErrors.PayloadTooLarge({ error: `the body must be at most ${maxBytes} bytes`, code: "payload_too_large" })
    if (Number.isFinite(declared) && declared > maxBytes) return yield* tooLarge
    const parts: Array<Uint8Array> = []
    let size = 0
    const failure = yield* Stream.runForEach(request.stream, (part) => {
      size += part.length
      if (size > maxBytes) return Effect.fail(tooLarge)
      parts.push(part)
      return Effect.void
    }).pipe(
      Effect.as(undefined),
      Effect.catch((e) =>
        Effect.succeed(
          e instanceof ApiErrors.PayloadTooLarge ? e
          // A zstd body decompressed past the limit (ContentEncoding).
          : isBodyTooLarge(e) ? tooLarge
          : new ApiErrors.BadRequest({ error: "the request body could not be read", code: "invalid_request" })
        ))
    )
    if (failure !== undefined) return yield* failure
    return parts.length === 1 ? parts[0]! : new Uint8Array(Buffer.concat(parts))
  })
