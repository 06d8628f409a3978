/**
 * How the HTTP edge sends merges, syncs and reverts: Repository entity commands, through the entity
 * runtime to the partition owner of `owner/name`, in embedded and cluster mode alike.
 */
import { Context, Effect, Layer } from "effect"
import { repositorySlice } from "../entities/EntitySlices.ts"
import { type GatewayFailure, gatewaySender, type WriteRequest } from "../entities/Sending.ts"
import * as MergeCommand from "./MergeCommand.ts"
import * as SyncRevert from "./SyncRevertCommands.ts"

type MergeReply = Effect.Effect<typeof MergeCommand.MergeSuccess.Type, MergeCommand.MergeError | GatewayFailure>
type Landing<A> = Effect.Effect<A, SyncRevert.LandError | GatewayFailure>

export class MergeGateway extends Context.Service<MergeGateway, {
  readonly merge: (entityId: string, payload: typeof MergeCommand.MergePayload.Type, request?: WriteRequest) => MergeReply
  readonly sync: (entityId: string, payload: typeof SyncRevert.SyncPayload.Type, request?: WriteRequest) => Landing<typeof SyncRevert.SyncSuccess.Type>
  readonly revert: (entityId: string, payload: typeof SyncRevert.RevertPayload.Type, request?: WriteRequest) => Landing<typeof SyncRevert.RevertSuccess.Type>
}>()("grove/server/merges/MergeGateway") {
  static readonly layer = Layer.effect(MergeGateway, Effect.gen(function*() {
    const send = yield* gatewaySender(repositorySlice({ ...MergeCommand.commands, ...SyncRevert.commands }))
    return MergeGateway.of({ merge: send("Merge"), sync: send("Sync"), revert: send("Revert") })
  }))
}
