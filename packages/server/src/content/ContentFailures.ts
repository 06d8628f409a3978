/** Content failures at the handler edge: rejections are the caller's (400), storage trouble is ours (503). */
import { ApiErrors } from "@grove/api"
import { Effect } from "effect"
import type { BranchError } from "./BranchCommands.ts"
import type { GatewayFailure } from "../entities/Sending.ts"
import { type GatewayApiError, gatewayApiError, isGatewayFailure } from "../http/Failures.ts"
import { type BranchApiError, branchApiError } from "./BranchErrors.ts"

const unavailable = (what: string) =>
  new ApiErrors.ServiceUnavailable({ error: `${what} is unavailable; try again`, code: "unavailable", retryable: true })

type Tagged = { readonly _tag: string }

/** Maps PushRejected / ChunkRejected to 400, ObjectStore and SQL failures to 503; other errors pass through. */
export const contentFailure = <A, E extends Tagged, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catch(effect as Effect.Effect<A, Tagged, R>, (error: Tagged): Effect.Effect<never, unknown> => {
    switch (error._tag) {
      case "PushRejected":
      case "ChunkRejected": {
        const e = error as unknown as { reason: string; code?: string }
        return Effect.fail(new ApiErrors.BadRequest({ error: e.reason, code: e.code ?? "invalid_chunk" }))
      }
      case "ObjectNotFound":
        return Effect.logError("content bytes missing from the object store", error).pipe(Effect.andThen(Effect.fail(unavailable("stored content"))))
      case "ObjectStoreError":
        return Effect.logWarning("object store failure", error).pipe(Effect.andThen(Effect.fail(unavailable("the object store"))))
      case "SqlError":
        return Effect.logWarning("database unavailable", error).pipe(Effect.andThen(Effect.fail(unavailable("the database"))))
      default:
        return Effect.fail(error)
    }
  }) as Effect.Effect<
    A,
    Exclude<E, { readonly _tag: "PushRejected" | "ChunkRejected" | "ObjectNotFound" | "ObjectStoreError" | "SqlError" }> | ApiErrors.BadRequest | ApiErrors.ServiceUnavailable,
    R
  >

export const branchCommandFailure = (
  error: BranchError | GatewayFailure
): Effect.Effect<never, BranchApiError | GatewayApiError> =>
  Effect.fail(isGatewayFailure(error) ? gatewayApiError(error) : branchApiError(error))
