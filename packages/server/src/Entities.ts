/**
 * The entities on the entity runtime, composed from the features' slices: each feature defines its
 * commands and handlers for the Repository, Branch, Organization or CiRun entity (and a gateway
 * that sends them); this registers each entity once, to run on the owner of its partition. Also the
 * reading of operations that outlived their request, from each feature's mapping of its own errors.
 */
import { ApiErrors } from "@grove/api"
import { Entity, EntityRuntime } from "@grove/bus"
import { Effect, Layer, Option } from "effect"
import * as BranchCommands from "./content/BranchCommands.ts"
import { storedBranchErrorResponse } from "./content/BranchErrors.ts"
import { BranchGateway } from "./content/BranchGateway.ts"
import { storedCiErrorResponse } from "./ci/CiErrors.ts"
import { CiGateway } from "./ci/CiGateway.ts"
import * as CiQueue from "./ci/CiQueueCommand.ts"
import * as CiRun from "./ci/CiRunCommands.ts"
import * as CiSecretCommands from "./ci/CiSecretCommands.ts"
import { branchSlice, organizationSlice, repositorySlice } from "./entities/EntitySlices.ts"
import { Operations } from "./entities/Operations.ts"
import { principalKey } from "./http/CallerContext.ts"
import * as ApiKeyCommands from "./identity/ApiKeyCommands.ts"
import { ApiKeyGateway } from "./identity/ApiKeyGateway.ts"
import * as MergeCommand from "./merges/MergeCommand.ts"
import { storedMergeErrorResponse } from "./merges/MergeErrors.ts"
import { MergeGateway } from "./merges/MergeGateway.ts"
import * as SyncRevert from "./merges/SyncRevertCommands.ts"
import * as OrganizationCommands from "./orgs/OrganizationCommands.ts"
import { storedOrganizationErrorResponse } from "./orgs/OrganizationErrors.ts"
import { OrganizationGateway } from "./orgs/OrganizationGateway.ts"
import * as RepositoryCommands from "./repos/RepositoryCommands.ts"
import { storedRepositoryErrorResponse } from "./repos/RepositoryErrors.ts"
import { RepositoryGateway } from "./repos/RepositoryGateway.ts"
import * as SiteCommands from "./sites/SiteCommands.ts"
import { storedSiteErrorResponse } from "./sites/SiteErrors.ts"
import { SiteGateway } from "./sites/SiteGateway.ts"
import * as ServiceAccountCommands from "./service-accounts/ServiceAccountCommands.ts"
import { storedServiceAccountErrorResponse } from "./service-accounts/ServiceAccountErrors.ts"
import { ServiceAccountGateway } from "./service-accounts/ServiceAccountGateway.ts"
import * as FinalizeStage from "./staged-push/FinalizeStageCommand.ts"
import { storedStageErrorResponse } from "./staged-push/StagedPushErrors.ts"
import { StagedPushGateway } from "./staged-push/StagedPushGateway.ts"
import * as WebhookCommands from "./webhooks/WebhookCommands.ts"
import { storedWebhookErrorResponse } from "./webhooks/WebhookErrors.ts"
import { WebhookGateway } from "./webhooks/WebhookGateway.ts"

/** Key `owner/name`: the repository's own commands, merges, syncs and reverts, CI secrets, webhooks. */
const Repository = repositorySlice({
  ...RepositoryCommands.commands,
  ...MergeCommand.commands,
  ...SyncRevert.commands,
  ...CiSecretCommands.commands,
  ...WebhookCommands.commands
})
const repositoryHandlers: Entity.Handlers<typeof Repository> = {
  ...RepositoryCommands.handlers,
  ...MergeCommand.handlers,
  ...SyncRevert.handlers,
  ...CiSecretCommands.handlers,
  ...WebhookCommands.handlers
}

/** Key `owner/name:branch`: the branch's own commands, queuing CI runs (serialized with pushes), finishing a staged push. */
const Branch = branchSlice({ ...BranchCommands.commands, ...CiQueue.commands, ...FinalizeStage.commands })
const branchHandlers: Entity.Handlers<typeof Branch> = { ...BranchCommands.handlers, ...CiQueue.handlers, ...FinalizeStage.handlers }

/** Key the slug: the organization, its members and groups, its service accounts, a user's personal keys. */
const Organization = organizationSlice({
  ...OrganizationCommands.commands,
  ...ServiceAccountCommands.commands,
  ...ApiKeyCommands.commands,
  ...SiteCommands.commands
})
const organizationHandlers: Entity.Handlers<typeof Organization> = {
  ...OrganizationCommands.handlers,
  ...ServiceAccountCommands.handlers,
  ...ApiKeyCommands.handlers,
  ...SiteCommands.handlers
}

const Registered = Layer.mergeAll(
  EntityRuntime.EntityRuntime.register(Repository, repositoryHandlers),
  EntityRuntime.EntityRuntime.register(Branch, branchHandlers),
  EntityRuntime.EntityRuntime.register(Organization, organizationHandlers),
  EntityRuntime.EntityRuntime.register(CiRun.CiRunEntity, CiRun.handlers)
)

const Gateways = Layer.mergeAll(
  RepositoryGateway.layer,
  MergeGateway.layer,
  BranchGateway.layer,
  StagedPushGateway.layer,
  CiGateway.layer,
  WebhookGateway.layer,
  OrganizationGateway.layer,
  ServiceAccountGateway.layer,
  ApiKeyGateway.layer,
  SiteGateway.layer
)

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
  RemoveWebhook: 204,
  DeleteSite: 204
}

/** Each feature's reading of its stored errors, asked in turn (branch errors before merges', which include them). */
const storedErrorAnswers = [
  storedRepositoryErrorResponse,
  storedBranchErrorResponse,
  storedMergeErrorResponse,
  storedOrganizationErrorResponse,
  storedServiceAccountErrorResponse,
  storedCiErrorResponse,
  storedWebhookErrorResponse,
  storedStageErrorResponse,
  storedSiteErrorResponse
]

/** A stored command error as the API would have answered it live. */
const storedErrorResponse = (error: unknown) => {
  for (const answer of storedErrorAnswers) {
    const found = answer(error)
    if (found !== undefined) return found
  }
  return undefined
}

const entities: ReadonlyArray<Entity.Entity> = [Repository, Branch, Organization, CiRun.CiRunEntity]

/**
 * A stored success as its command's success schema encodes it now: a reply stored by an older version may
 * carry what that schema dropped since (a merge's `repository` row, before the command protocol's notes), kept
 * until the inbox's retention. Left as stored when it does not decode (or the command is unknown here).
 */
export const storedSuccessResponse = (entityType: string, command: string, value: unknown): Effect.Effect<unknown> => {
  const entity = entities.find((candidate) => candidate.name === entityType)
  const schemas = entity === undefined ? undefined : Entity.commandOf(entity, command)
  if (schemas === undefined) return Effect.succeed(value)
  return Entity.decodeJson(schemas.success, value).pipe(
    Effect.flatMap((decoded) => Entity.encodeJson(schemas.success, decoded)),
    Effect.orElseSucceed(() => value)
  )
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
      const { reply, command, entityType } = found.value
      if (reply === undefined) return { id: operationId, status: "pending" as const }
      switch (reply._tag) {
        case "Success":
          return {
            id: operationId,
            status: "done" as const,
            http_status: successStatus[command] ?? 200,
            response: yield* storedSuccessResponse(entityType, command, reply.value)
          }
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

/** Every entity registered, every feature's gateway, and the operations. */
export const EntitiesLive = Layer.mergeAll(Registered, Gateways, OperationsLive)
