/** How the HTTP edge finishes a staged push: the Branch entity's FinalizeStage command, in both modes. */
import { Context, Effect, Layer } from "effect"
import { branchSlice } from "../entities/EntitySlices.ts"
import { gatewaySender } from "../entities/Sending.ts"
import * as FinalizeStage from "./FinalizeStageCommand.ts"

const make = Effect.gen(function*() {
  const branch = yield* gatewaySender(branchSlice(FinalizeStage.commands))
  return { finalize: branch("FinalizeStage") }
})

export class StagedPushGateway extends Context.Service<StagedPushGateway, Effect.Success<typeof make>>()(
  "grove/server/staged-push/StagedPushGateway"
) {
  static readonly layer = Layer.effect(StagedPushGateway, make)
}
