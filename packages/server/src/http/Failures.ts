/** Turning internal failures into the API's errors at the handler edge. */
import { ApiErrors } from "@grove/api"
import type { Names } from "@grove/core"
import { Effect, Option, Schema } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { GatewayFailure } from "../entities/Sending.ts"

/** A database failure is the server's problem, never the caller's: 503, retryable. */
export const dbUnavailable = <A, E, R>(effect: Effect.Effect<A, E | SqlError, R>) =>
  Effect.catchIf(
    effect,
    (error): error is SqlError => typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "SqlError",
    (error) =>
      Effect.logWarning("database unavailable", error).pipe(
        Effect.andThen(Effect.fail(new ApiErrors.ServiceUnavailable({ error: "the database is unavailable; try again", code: "unavailable", retryable: true })))
      )
  ) as Effect.Effect<A, Exclude<E, SqlError> | ApiErrors.ServiceUnavailable, R>

export const requireValid = (check: Names.NameCheck): Effect.Effect<void, ApiErrors.BadRequest> =>
  check.ok ? Effect.void : Effect.fail(new ApiErrors.BadRequest({ error: check.reason, code: "invalid_input" }))

export type StatusApiError =
  | ApiErrors.BadRequest
  | ApiErrors.Forbidden
  | ApiErrors.NotFound
  | ApiErrors.Conflict
  | ApiErrors.PreconditionFailed
  | ApiErrors.PayloadTooLarge

/** The API error class of a status a domain error maps to (400 for anything unlisted). */
export const apiErrorOf = (
  status: number,
  body: {
    readonly error: string
    readonly code: string
    readonly retryable?: boolean
    readonly conflict_paths?: ReadonlyArray<string>
    readonly repositories?: ReadonlyArray<string>
  }
): StatusApiError => {
  switch (status) {
    case 403:
      return new ApiErrors.Forbidden(body)
    case 404:
      return new ApiErrors.NotFound(body)
    case 409:
      return new ApiErrors.Conflict(body)
    case 412:
      return new ApiErrors.PreconditionFailed(body)
    case 413:
      return new ApiErrors.PayloadTooLarge(body)
    default:
      return new ApiErrors.BadRequest(body)
  }
}

export type GatewayApiError = ApiErrors.OperationPending | ApiErrors.ServiceUnavailable | ApiErrors.Conflict

/** How a write fared on its way to its entity, as the API answers it. */
export const gatewayApiError = (error: GatewayFailure): GatewayApiError => {
  switch (error._tag) {
    case "CommandPending":
      return new ApiErrors.OperationPending({
        error: "the write is still in progress; poll the operation",
        code: "pending",
        operation_id: error.operationId
      })
    case "CommandUnavailable":
      return new ApiErrors.ServiceUnavailable({ error: error.message, code: "unavailable", retryable: true })
    case "CommandNotApplied":
      // Settled: the same key answers the same; the failure is logged where it happened, its reason is not echoed.
      return new ApiErrors.ServiceUnavailable({
        error: `the write failed and was not applied (operation ${error.operationId}); retry with a new Idempotency-Key`,
        code: "write_failed"
      })
    case "IdempotencyKeyReused":
      return new ApiErrors.Conflict({
        error: "this Idempotency-Key was used for another request; use a new key for a new request",
        code: "idempotency_key_reused"
      })
  }
}

const gatewayTags: ReadonlySet<string> = new Set(["CommandPending", "CommandUnavailable", "CommandNotApplied", "IdempotencyKeyReused"])

export const isGatewayFailure = (error: { readonly _tag: string }): error is GatewayFailure => gatewayTags.has(error._tag)

/** An answer as the API gives it: a status and its JSON body. */
export interface StoredAnswer {
  readonly status: number
  readonly body: unknown
}

/**
 * A feature's reading of a stored command error (an operation's reply): the answer the API would have
 * given live, or undefined when the error is not one of `schema`'s. The wiring asks each feature's in turn.
 */
// oxlint-disable-next-line no-explicit-any
export const storedErrorAnswer = <A>(schema: Schema.Codec<A, any, never, never>, answer: (error: A) => StoredAnswer) => {
  const decode = Schema.decodeUnknownOption(schema)
  return (error: unknown): StoredAnswer | undefined => {
    const decoded = decode(error)
    return Option.isSome(decoded) ? answer(decoded.value) : undefined
  }
}
