/**
 * The server side of the Authentication middleware: no Authorization header
 * means anonymous; a bearer token must be valid (401 otherwise, never a silent
 * fallback to anonymous); a token that cannot be checked because the database
 * is unreachable is 503, retryable (never 401: clients take a 401 as "your
 * credentials are wrong" and stop). Also the RequestValidation middleware: path
 * parameters checked first, and the 400 body for requests that fail decoding.
 */
import { ApiErrors, Authentication, type Caller, CurrentCaller, RequestValidation } from "@grove/api"
import { Effect, Layer, Schema, type Types } from "effect"
import { type HttpRouter, HttpServerRequest, type HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { Identity } from "../access/Identity.ts"
import { checkRouteParams, invalidParams } from "./PathParams.ts"
import { noteCaller } from "./RequestRecord.ts"

export const anonymous: Caller = { principal: { kind: "anonymous" }, limits: { kind: "none" } }
/** `Authorization: Bearer <token>`: the token is the first group. */
export const BEARER = /^Bearer\s+(\S+)\s*$/i

/** The caller behind a request's Authorization header: anonymous without one, 401 for a bad one. */
export const callerOf = (identity: Identity["Service"], header: string | undefined) =>
  Effect.gen(function*() {
    if (header === undefined || header === "") return anonymous
    const match = BEARER.exec(header)
    if (match === null) {
      return yield* new ApiErrors.Unauthorized({ error: "the Authorization header must be 'Bearer <token>'", code: "bad_authorization" })
    }
    return yield* identity.authenticate(match[1]!).pipe(
      // The access log names the caller (never the token).
      Effect.tap((caller) => Effect.withFiber((fiber) => Effect.succeed(noteCaller(fiber.context, caller.principal)))),
      Effect.catchTags({
        InvalidToken: () =>
          Effect.fail(new ApiErrors.Unauthorized({ error: "the token is invalid, expired or revoked", code: "invalid_token" })),
        TokenExpired: () => Effect.fail(new ApiErrors.Unauthorized({ error: "the token has expired", code: "token_expired" })),
        SqlError: (error) =>
          Effect.logWarning("database unavailable: could not check a token", error.reason._tag).pipe(
            Effect.andThen(Effect.fail(
              new ApiErrors.ServiceUnavailable({ error: "could not check the token right now; try again", code: "auth_unavailable", retryable: true })
            ))
          )
      })
    )
  })

export const AuthenticationLive = Layer.effect(Authentication, Effect.gen(function*() {
  const identity = yield* Identity
  return Authentication.of((httpEffect) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const caller = yield* callerOf(identity, request.headers["authorization"])
      return yield* Effect.provideService(httpEffect, CurrentCaller, caller)
    })
  )
}))

/**
 * Runs outermost: path parameters are checked (`400 { error, code: "invalid_input" }`) before the
 * token lookup and the handler. Other decoding failures (query, headers, body) become
 * `400 { error, code: "invalid_request" }` naming what was wrong.
 */
export const RequestValidationLive = Layer.succeed(RequestValidation, (httpEffect, { endpoint }) => {
  const checked = endpoint.params === undefined ? httpEffect : Effect.andThen(checkRouteParams(endpoint.params), httpEffect)
  // Like layerSchemaErrorTransform: only the schema failures are answered here, every other
  // failure passes through untouched (the widening cast says so to the middleware's types).
  return (Effect.catch(checked, (error: unknown) =>
    !HttpApiError.HttpApiSchemaError.is(error)
      ? Effect.fail(error)
      : error.kind === "Params" && Schema.isSchemaError(error.cause)
      ? Effect.fail(invalidParams(error.cause))
      : Effect.fail(
        new ApiErrors.BadRequest({
          error: `invalid request ${error.kind.toLowerCase()}: ${String(error.cause.message ?? error.cause).slice(0, 500)}`,
          code: "invalid_request"
        })
      ))) as Effect.Effect<
        HttpServerResponse.HttpServerResponse,
        ApiErrors.BadRequest | Types.unhandled,
        HttpRouter.Provided
      >
})
