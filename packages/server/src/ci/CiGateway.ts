/**
 * How CI sends its commands: queuing runs to the Branch entity, run transitions to the CiRun
 * entity, secrets to the Repository entity; through the entity runtime in both modes.
 */
import { EntityRuntime } from "@grove/bus"
import { Context, Effect, Layer } from "effect"
import { ServerConfig } from "../Config.ts"
import { BranchEntity } from "../entities/BranchEntity.ts"
import { RepositoryEntity } from "../repos/RepositoryCommands.ts"
import { sender } from "../entities/Sending.ts"
import { CiRunEntity, handlers } from "./CiRunCommands.ts"

const make = Effect.gen(function*() {
  const config = yield* ServerConfig
  const runtime = yield* EntityRuntime.EntityRuntime
  const branch = sender(runtime, BranchEntity, config.commandTimeoutMs)
  const run = sender(runtime, CiRunEntity, config.commandTimeoutMs)
  const repository = sender(runtime, RepositoryEntity, config.commandTimeoutMs)
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
  /** Registers the CiRun entity's handlers and provides the gateway. */
  static readonly live = Layer.merge(EntityRuntime.EntityRuntime.register(CiRunEntity, handlers), CiGateway.layer)
}
