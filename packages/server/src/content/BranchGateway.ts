/**
 * How the HTTP edge sends Branch commands: through the entity runtime to the
 * owner of the repository's partition, in embedded and cluster mode alike.
 */
import type { ApiSync } from "@grove/api"
import { Context, Effect, Layer } from "effect"
import { branchSlice } from "../entities/EntitySlices.ts"
import { type GatewayFailure, gatewaySender, type WriteRequest } from "../entities/Sending.ts"
import * as Commands from "./BranchCommands.ts"

type Failure = Commands.BranchError | GatewayFailure
type Reply<A> = Effect.Effect<A, Failure>

export class BranchGateway extends Context.Service<BranchGateway, {
  readonly push: (entityId: string, payload: typeof Commands.PushPayload.Type, request?: WriteRequest) => Reply<ApiSync.PushResponse>
  readonly create: (entityId: string, payload: typeof Commands.CreatePayload.Type, request?: WriteRequest) => Reply<ApiSync.Branch>
  readonly close: (entityId: string, payload: typeof Commands.ClosePayload.Type, request?: WriteRequest) => Reply<ApiSync.Branch>
  readonly reopen: (entityId: string, payload: typeof Commands.ReopenPayload.Type, request?: WriteRequest) => Reply<ApiSync.Branch>
}>()("grove/server/content/BranchGateway") {
  static readonly layer = Layer.effect(BranchGateway, Effect.gen(function*() {
    const send = yield* gatewaySender(branchSlice(Commands.commands))
    return BranchGateway.of({ push: send("Push"), create: send("Create"), close: send("Close"), reopen: send("Reopen") })
  }))
}
