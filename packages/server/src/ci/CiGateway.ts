/**
 * How CI sends its commands: queuing runs to the Branch entity, run transitions to the CiRun
 * entity, secrets to the Repository entity; through the entity runtime in both modes.
 */
import { Context, Effect, Layer } from "effect"
import { branchSlice, repositorySlice } from "../entities/EntitySlices.ts"
import { gatewaySender } from "../entities/Sending.ts"
import * as CiQueue from "./CiQueueCommand.ts"
import { CiRunEntity } from "./CiRunCommands.ts"
import * as CiSecretCommands from "./CiSecretCommands.ts"

const make = Effect.gen(function*() {
  const branch = yield* gatewaySender(branchSlice(CiQueue.commands))
  const run = yield* gatewaySender(CiRunEntity)
  const repository = yield* gatewaySender(repositorySlice(CiSecretCommands.commands))
  return {
    queue: branch("QueueCiRuns"),
    start: run("Start"),
    progress: run("Progress"),
    finish: run("Finish"),
    cancel: run("Cancel"),
    failLost: run("FailLost"),
    setSecret: repository("SetCiSecret"),
    deleteSecret: repository("DeleteCiSecret")
  }
})

export class CiGateway extends Context.Service<CiGateway, Effect.Success<typeof make>>()("grove/server/ci/CiGateway") {
  static readonly layer = Layer.effect(CiGateway, make)
}
