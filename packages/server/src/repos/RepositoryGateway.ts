/**
 * How the HTTP edge sends the repository's own commands (create, delete, visibility, transfer):
 * through the entity runtime to the partition owner of `owner/name`, in embedded and cluster mode alike.
 */
import type { ApiSchemas } from "@grove/api"
import { Context, Effect, Layer } from "effect"
import { repositorySlice } from "../entities/EntitySlices.ts"
import { type GatewayFailure, gatewaySender, type WriteRequest } from "../entities/Sending.ts"
import * as Commands from "./RepositoryCommands.ts"

type Reply = Effect.Effect<ApiSchemas.Repository, Commands.RepositoryError | GatewayFailure>

export class RepositoryGateway extends Context.Service<RepositoryGateway, {
  readonly create: (entityId: string, payload: typeof Commands.CreatePayload.Type, request?: WriteRequest) => Reply
  readonly remove: (entityId: string, payload: typeof Commands.DeletePayload.Type, request?: WriteRequest) => Reply
  readonly setVisibility: (entityId: string, payload: typeof Commands.SetVisibilityPayload.Type, request?: WriteRequest) => Reply
  readonly transfer: (entityId: string, payload: typeof Commands.TransferPayload.Type, request?: WriteRequest) => Reply
}>()("grove/server/repos/RepositoryGateway") {
  static readonly layer = Layer.effect(RepositoryGateway, Effect.gen(function*() {
    const send = yield* gatewaySender(repositorySlice(Commands.commands))
    return RepositoryGateway.of({ create: send("Create"), remove: send("Delete"), setVisibility: send("SetVisibility"), transfer: send("Transfer") })
  }))
}
