/**
 * How the HTTP edge sends merges, syncs and reverts: Repository entity commands, through the entity
 * runtime to the partition owner of `owner/name`, in embedded and cluster mode alike.
 */
import type { Entity } from "@grove/bus"
import { Context, Effect, Layer } from "effect"
import type { RepositoryWritten } from "../access/RepositoryRecord.ts"
import { repositorySlice } from "../entities/EntitySlices.ts"
import { type GatewayFailure, gatewayNotedSender, type WriteRequest } from "../entities/Sending.ts"
import * as MergeCommand from "./MergeCommand.ts"
import * as SyncRevert from "./SyncRevertCommands.ts"

/** Each answers the command's success with the repository row as it landed (a live reply's note; see `afterRepositoryWrite`). */
type MergeReply = Effect.Effect<Entity.Replied<typeof MergeCommand.MergeSuccess.Type, RepositoryWritten>, MergeCommand.MergeError | GatewayFailure>
type Landing<A> = Effect.Effect<Entity.Replied<A, RepositoryWritten>, SyncRevert.LandError | GatewayFailure>

export class MergeGateway extends Context.Service<MergeGateway, {
  readonly merge: (entityId: string, payload: typeof MergeCommand.MergePayload.Type, request?: WriteRequest) => MergeReply
  readonly sync: (entityId: string, payload: typeof SyncRevert.SyncPayload.Type, request?: WriteRequest) => Landing<typeof SyncRevert.SyncSuccess.Type>
  readonly revert: (entityId: string, payload: typeof SyncRevert.RevertPayload.Type, request?: WriteRequest) => Landing<typeof SyncRevert.RevertSuccess.Type>
}>()("grove/server/merges/MergeGateway") {
  static readonly layer = Layer.effect(MergeGateway, Effect.gen(function*() {
    const send = yield* gatewayNotedSender(repositorySlice({ ...MergeCommand.commands, ...SyncRevert.commands }))
    return MergeGateway.of({ merge: send("Merge"), sync: send("Sync"), revert: send("Revert") })
  }))
}
