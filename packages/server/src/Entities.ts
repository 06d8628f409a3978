/**
 * The Repository entity on the entity runtime: its handlers (run by the owner
 * of the repository's partition), the gateway the HTTP edge sends commands
 * through, and the reading of operations that outlived their request.
 */
import { ApiErrors } from "@grove/api"
import { EntityRuntime } from "@grove/bus"
import { Effect, Layer, Option, Schema } from "effect"
import { storedCiErrorResponse } from "./ci/CiErrors.ts"
import { storedWebhookErrorResponse } from "./webhooks/WebhookErrors.ts"
import { storedStageErrorResponse } from "./staged-push/StagedPushErrors.ts"
import { ServerConfig } from "./Config.ts"
import * as BranchCommands from "./content/BranchCommands.ts"
import * as MergeCommand from "./merges/MergeCommand.ts"
import { mergeErrorResponse } from "./merges/MergeErrors.ts"
import { branchErrorResponse } from "./content/BranchErrors.ts"
import { principalKey } from "./http/CallerContext.ts"
import { repositoryErrorResponse } from "./repos/RepositoryErrors.ts"
import { OrganizationError, organizationErrorResponse } from "./orgs/OrganizationErrors.ts"
import { ServiceAccountError, serviceAccountErrorResponse } from "./service-accounts/ServiceAccountErrors.ts"
import { Operations } from "./entities/Operations.ts"
import * as Commands from "./repos/RepositoryCommands.ts"
import { RepositoryGateway, sender } from "./entities/Sending.ts"

const Handlers = EntityRuntime.EntityRuntime.register(Commands.RepositoryEntity, Commands.handlers)

const Gateway = Layer.effect(RepositoryGateway, Effect.gen(function*() {
  const config = yield* ServerConfig
  const send = sender(yield* EntityRuntime.EntityRuntime, Commands.RepositoryEntity, config.commandTimeoutMs)
  return RepositoryGateway.of({
    create: send("Create"),
    remove: send("Delete"),
    setVisibility: send("SetVisibility"),
    merge: send("Merge"),
    sync: send("Sync"),
    revert: send("Revert"),
    transfer: send("Transfer")
  })
}))

/** The status of a command's success, where it is not 200 (the Repository and Organization entities agree on names). */
const successStatus: Record<string, number> = {
  Create: 201,
  Delete: 204,
  AddMember: 201,
  RemoveMember: 204,
  CreateGroup: 201,
  DeleteGroup: 204,
  RemoveGroupMember: 204,
  CreateServiceAccount: 201,
  DeleteServiceAccount: 204,
  CreateServiceAccountKey: 201,
  RevokeServiceAccountKey: 204,
  CreatePersonalKey: 201,
  RevokePersonalKey: 204,
  DeleteCiSecret: 204,
  AddWebhook: 201,
  RemoveWebhook: 204
}

const decodeRepositoryError = Schema.decodeUnknownOption(Commands.RepositoryError)
const decodeBranchError = Schema.decodeUnknownOption(BranchCommands.BranchError)
const decodeMergeError = Schema.decodeUnknownOption(MergeCommand.MergeError)
const decodeOrganizationError = Schema.decodeUnknownOption(OrganizationError)
const decodeServiceAccountError = Schema.decodeUnknownOption(ServiceAccountError)

/** A stored command error as the API would have answered it live. */
const storedErrorResponse = (error: unknown): { status: number; body: unknown } | undefined => {
  const repositoryError = decodeRepositoryError(error)
  if (Option.isSome(repositoryError)) return repositoryErrorResponse(repositoryError.value)
  const branchError = decodeBranchError(error)
  if (Option.isSome(branchError)) return branchErrorResponse(branchError.value)
  const mergeError = decodeMergeError(error)
  if (Option.isSome(mergeError)) return mergeErrorResponse(mergeError.value)
  const organizationError = decodeOrganizationError(error)
  if (Option.isSome(organizationError)) return organizationErrorResponse(organizationError.value)
  const serviceAccountError = decodeServiceAccountError(error)
  if (Option.isSome(serviceAccountError)) return serviceAccountErrorResponse(serviceAccountError.value)
  return storedCiErrorResponse(error) ?? storedWebhookErrorResponse(error) ?? storedStageErrorResponse(error)
}

const OperationsLive = Layer.effect(Operations, Effect.gen(function*() {
  const runtime = yield* EntityRuntime.EntityRuntime
  return Operations.of({
    get: Effect.fn("Operations.get")(function*(caller, operationId) {
      const found = yield* runtime.operation(operationId).pipe(
        Effect.catchTag("SqlError", () =>
          Effect.fail(new ApiErrors.ServiceUnavailable({ error: "the database is unavailable; try again", code: "unavailable", retryable: true })))
      )
      // Unknown, and someone else's, look the same: only the caller who started a write may read it.
      if (Option.isNone(found) || found.value.owner !== principalKey(caller)) {
        return yield* new ApiErrors.NotFound({ error: "operation not found", code: "not_found" })
      }
      const { reply, command } = found.value
      if (reply === undefined) return { id: operationId, status: "pending" as const }
      switch (reply._tag) {
        case "Success":
          return { id: operationId, status: "done" as const, http_status: successStatus[command] ?? 200, response: reply.value }
        case "Failure": {
          const answer = storedErrorResponse(reply.error)
          if (answer !== undefined) return { id: operationId, status: "done" as const, http_status: answer.status, response: answer.body }
          return { id: operationId, status: "done" as const, ...notApplied }
        }
        case "Defect":
          return { id: operationId, status: "done" as const, ...notApplied }
      }
    })
  })
}))

/** A write that was handled and failed: nothing was applied (the reason is in the server's log, not echoed). */
const notApplied = {
  http_status: 503,
  response: { error: "the write failed and was not applied; retry with a new Idempotency-Key", code: "write_failed" }
} as const

export const RepositoryEntityLive = Layer.mergeAll(Handlers, Gateway, OperationsLive)
