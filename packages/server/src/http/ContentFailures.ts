/** Content failures at the handler edge: rejections are the caller's (400), storage trouble is ours (503). */
import { ApiErrors } from "@grove/api"
import { Effect } from "effect"
import type { BranchError } from "../content/BranchCommands.ts"
import type { CommandPending, CommandUnavailable } from "../entities/RepositoryGateway.ts"
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
  error: BranchError | CommandPending | CommandUnavailable
): Effect.Effect<never, BranchApiError | ApiErrors.OperationPending | ApiErrors.ServiceUnavailable> => {
  switch (error._tag) {
    case "CommandPending":
      return Effect.fail(
        new ApiErrors.OperationPending({ error: "the write is still in progress; poll the operation", code: "pending", operation_id: error.operationId })
      )
    case "CommandUnavailable":
      return Effect.fail(new ApiErrors.ServiceUnavailable({ error: error.message, code: "unavailable", retryable: true }))
    default:
      return Effect.fail(branchApiError(error))
  }
}
