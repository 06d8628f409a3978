/** Turning internal failures into the API's errors at the handler edge. */
import { ApiErrors } from "@grove/api"
import type { Names } from "@grove/core"
import { Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"

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
