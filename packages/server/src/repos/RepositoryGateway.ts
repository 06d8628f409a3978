/**
 * How the HTTP edge sends the repository's own commands (create, delete, visibility, transfer):
 * through the entity runtime to the partition owner of `owner/name`, in embedded and cluster mode alike.
 */
import type { ApiSchemas } from "@grove/api"
import type { Entity } from "@grove/bus"
import { Context, Effect, Layer } from "effect"
import type { RepositoryWritten } from "../access/RepositoryRecord.ts"
import { repositorySlice } from "../entities/EntitySlices.ts"
import { type GatewayFailure, gatewayNotedSender, gatewaySender, type WriteRequest } from "../entities/Sending.ts"
import * as Commands from "./RepositoryCommands.ts"

type Reply = Effect.Effect<ApiSchemas.Repository, Commands.RepositoryError | GatewayFailure>
/** With the row as written when the visibility changed (a live reply's note; see `afterRepositoryWrite`). */
type NotedReply = Effect.Effect<Entity.Replied<ApiSchemas.Repository, RepositoryWritten>, Commands.RepositoryError | GatewayFailure>

export class RepositoryGateway extends Context.Service<RepositoryGateway, {
  readonly create: (entityId: string, payload: typeof Commands.CreatePayload.Type, request?: WriteRequest) => Reply
  readonly remove: (entityId: string, payload: typeof Commands.DeletePayload.Type, request?: WriteRequest) => Reply
  readonly setVisibility: (entityId: string, payload: typeof Commands.SetVisibilityPayload.Type, request?: WriteRequest) => NotedReply
  readonly transfer: (entityId: string, payload: typeof Commands.TransferPayload.Type, request?: WriteRequest) => Reply
}>()("grove/server/repos/RepositoryGateway") {
  static readonly layer = Layer.effect(RepositoryGateway, Effect.gen(function*() {
    const slice = repositorySlice(Commands.commands)
    const send = yield* gatewaySender(slice)
    const sendNoted = yield* gatewayNotedSender(slice)
    return RepositoryGateway.of({ create: send("Create"), remove: send("Delete"), setVisibility: sendNoted("SetVisibility"), transfer: send("Transfer") })
  }))
}
