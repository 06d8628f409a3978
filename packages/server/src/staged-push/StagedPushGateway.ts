/** How the HTTP edge finishes a staged push: the Branch entity's FinalizeStage command, in both modes. */
import { EntityRuntime } from "@grove/bus"
import { Context, Effect, Layer } from "effect"
import { ServerConfig } from "../Config.ts"
import { BranchEntity } from "../entities/BranchEntity.ts"
import { sender } from "../entities/Sending.ts"

const make = Effect.gen(function*() {
  const config = yield* ServerConfig
  const branch = sender(yield* EntityRuntime.EntityRuntime, BranchEntity, config.commandTimeoutMs)
  return { finalize: branch("FinalizeStage") }
})

export class StagedPushGateway extends Context.Service<StagedPushGateway, Effect.Success<typeof make>>()(
  "grove/server/staged-push/StagedPushGateway"
) {
  static readonly layer = Layer.effect(StagedPushGateway, make)
}
