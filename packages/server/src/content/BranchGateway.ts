/**
 * How the HTTP edge sends Branch commands: through the entity runtime to the
 * owner of the repository's partition, in embedded and cluster mode alike.
 */
import type { ApiSync } from "@grove/api"
import { EntityRuntime } from "@grove/bus"
import { Context, Duration, Effect, Layer } from "effect"
import { ServerConfig } from "../Config.ts"
import { type CommandPending, type CommandUnavailable, toGatewayError } from "../entities/RepositoryGateway.ts"
import * as Commands from "./BranchCommands.ts"

type Failure = Commands.BranchError | CommandPending | CommandUnavailable
type Reply<A> = Effect.Effect<A, Failure>

export class BranchGateway extends Context.Service<BranchGateway, {
  readonly push: (entityId: string, payload: typeof Commands.PushPayload.Type, commandId?: string) => Reply<ApiSync.PushResponse>
  readonly create: (entityId: string, payload: typeof Commands.CreatePayload.Type, commandId?: string) => Reply<ApiSync.Branch>
  readonly close: (entityId: string, payload: typeof Commands.ClosePayload.Type, commandId?: string) => Reply<ApiSync.Branch>
  readonly reopen: (entityId: string, payload: typeof Commands.ReopenPayload.Type, commandId?: string) => Reply<ApiSync.Branch>
}>()("grove/server/content/BranchGateway") {
  static readonly layer = Layer.effect(BranchGateway, Effect.gen(function*() {
    const runtime = yield* EntityRuntime.EntityRuntime
    const config = yield* ServerConfig
    const entity = Commands.BranchEntity
    const options = (commandId: string | undefined) => ({ commandId, timeout: Duration.millis(config.commandTimeoutMs) })
    return BranchGateway.of({
      push: (id, payload, commandId) => runtime.send(entity, id, "Push", payload, options(commandId)).pipe(Effect.mapError(toGatewayError)),
      create: (id, payload, commandId) =>
        runtime.send(entity, id, "Create", payload, options(commandId)).pipe(Effect.mapError(toGatewayError)),
      close: (id, payload, commandId) => runtime.send(entity, id, "Close", payload, options(commandId)).pipe(Effect.mapError(toGatewayError)),
      reopen: (id, payload, commandId) =>
        runtime.send(entity, id, "Reopen", payload, options(commandId)).pipe(Effect.mapError(toGatewayError))
    })
  }))

  /** Registers the handlers with the runtime and provides the gateway. */
  static readonly live = Layer.merge(EntityRuntime.EntityRuntime.register(Commands.BranchEntity, Commands.handlers), BranchGateway.layer)
}
