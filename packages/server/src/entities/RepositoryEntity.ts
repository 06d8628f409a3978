/**
 * The Repository entity on the entity runtime: its handlers (run by the owner
 * of the repository's partition), the gateway the HTTP edge sends commands
 * through, and the reading of operations that outlived their request.
 */
import { ApiErrors } from "@grove/api"
import { EntityRuntime } from "@grove/bus"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import { ServerConfig } from "../Config.ts"
import * as BranchCommands from "../content/BranchCommands.ts"
import * as MergeCommand from "../content/MergeCommand.ts"
import { mergeErrorResponse } from "../http/MergeErrors.ts"
import { branchErrorResponse } from "../http/BranchErrors.ts"
import { repositoryErrorResponse } from "../http/RepositoryErrors.ts"
import { Operations } from "./Operations.ts"
import * as Commands from "./RepositoryCommands.ts"
import { RepositoryGateway, toGatewayError } from "./RepositoryGateway.ts"

const Handlers = EntityRuntime.EntityRuntime.register(Commands.RepositoryEntity, Commands.handlers)

const Gateway = Layer.effect(RepositoryGateway, Effect.gen(function*() {
  const runtime = yield* EntityRuntime.EntityRuntime
  const config = yield* ServerConfig
  const options = (commandId: string | undefined) => ({ commandId, timeout: Duration.millis(config.commandTimeoutMs) })
  const entity = Commands.RepositoryEntity
  return RepositoryGateway.of({
    create: (id, payload, commandId) =>
      runtime.send(entity, id, "Create", payload, options(commandId)).pipe(Effect.mapError(toGatewayError)),
    remove: (id, payload, commandId) =>
      runtime.send(entity, id, "Delete", payload, options(commandId)).pipe(Effect.mapError(toGatewayError)),
    setVisibility: (id, payload, commandId) =>
      runtime.send(entity, id, "SetVisibility", payload, options(commandId)).pipe(Effect.mapError(toGatewayError)),
    merge: (id, payload, commandId) =>
      runtime.send(entity, id, "Merge", payload, options(commandId)).pipe(Effect.mapError(toGatewayError)),
    sync: (id, payload, commandId) =>
      runtime.send(entity, id, "Sync", payload, options(commandId)).pipe(Effect.mapError(toGatewayError)),
    revert: (id, payload, commandId) =>
      runtime.send(entity, id, "Revert", payload, options(commandId)).pipe(Effect.mapError(toGatewayError)),
    transfer: (id, payload, commandId) =>
      runtime.send(entity, id, "Transfer", payload, options(commandId)).pipe(Effect.mapError(toGatewayError))
  })
}))

const successStatus: Record<string, number> = { Create: 201, Delete: 204, SetVisibility: 200, Transfer: 200 }

const decodeRepositoryError = Schema.decodeUnknownOption(Commands.RepositoryError)
const decodeBranchError = Schema.decodeUnknownOption(BranchCommands.BranchError)
const decodeMergeError = Schema.decodeUnknownOption(MergeCommand.MergeError)

/** A stored command error as the API would have answered it live. */
const storedErrorResponse = (error: unknown): { status: number; body: unknown } | undefined => {
  const repositoryError = decodeRepositoryError(error)
  if (Option.isSome(repositoryError)) return repositoryErrorResponse(repositoryError.value)
  const branchError = decodeBranchError(error)
  if (Option.isSome(branchError)) return branchErrorResponse(branchError.value)
  const mergeError = decodeMergeError(error)
  if (Option.isSome(mergeError)) return mergeErrorResponse(mergeError.value)
  return undefined
}

const OperationsLive = Layer.effect(Operations, Effect.gen(function*() {
  const runtime = yield* EntityRuntime.EntityRuntime
  return Operations.of({
    get: Effect.fn("Operations.get")(function*(caller, operationId) {
      const notFound = new ApiErrors.NotFound({ error: "operation not found", code: "not_found" })
      // Operation ids are unguessable UUIDs, or idempotency keys scoped to the caller who chose them.
      if (operationId.startsWith("idem:")) {
        const who = caller.principal.kind === "user"
          ? caller.principal.userId
          : caller.principal.kind === "service_account"
          ? caller.principal.accountId
          : "anonymous"
        if (!operationId.startsWith(`idem:${who}:`)) return yield* notFound
      } else if (!/^[0-9a-f-]{36}$/.test(operationId)) return yield* notFound
      const found = yield* runtime.operation(operationId).pipe(
        Effect.catchTag("SqlError", () =>
          Effect.fail(new ApiErrors.ServiceUnavailable({ error: "the database is unavailable; try again", code: "unavailable", retryable: true })))
      )
      if (Option.isNone(found)) return { id: operationId, status: "pending" as const }
      const { reply, command } = found.value
      switch (reply._tag) {
        case "Success":
          return { id: operationId, status: "done" as const, http_status: successStatus[command] ?? 200, response: reply.value }
        case "Failure": {
          const answer = storedErrorResponse(reply.error)
          if (answer === undefined) {
            return { id: operationId, status: "done" as const, http_status: 500, response: { error: "the write failed", code: "internal" } }
          }
          return { id: operationId, status: "done" as const, http_status: answer.status, response: answer.body }
        }
        case "Defect":
          return { id: operationId, status: "done" as const, http_status: 500, response: { error: "the write failed", code: "internal" } }
      }
    })
  })
}))

export const RepositoryEntityLive = Layer.mergeAll(Handlers, Gateway, OperationsLive)
