/**
 * Every endpoint runs behind this middleware. It resolves the bearer token (if
 * any) to the caller; a request without a token is anonymous, a request with a
 * bad, expired or revoked token is 401.
 */
import type { Access } from "@grove/core"
import { Context } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import { BadRequest, ServiceUnavailable, Unauthorized } from "./Errors.ts"

export interface Caller {
  readonly principal: Access.Principal
  readonly limits: Access.TokenLimits
  /** The token's id (for personal keys and sessions), to revoke or describe it. */
  readonly tokenId?: string | undefined
  readonly expiresAt?: Date | undefined
}

export class CurrentCaller extends Context.Service<CurrentCaller, Caller>()("grove/api/CurrentCaller") {}

export class Authentication extends HttpApiMiddleware.Service<Authentication, {
  provides: CurrentCaller
}>()("grove/api/Authentication", {
  // Every endpoint may answer these: a bad token (401), or a database that is down (503, retryable).
  error: [Unauthorized, BadRequest, ServiceUnavailable]
}) {}

/**
 * Checks the path parameters before anything else runs (the token lookup included), and turns
 * request decoding failures into the spec's 400 body.
 */
export class RequestValidation extends HttpApiMiddleware.Service<RequestValidation>()("grove/api/RequestValidation", {
  error: BadRequest
}) {}
