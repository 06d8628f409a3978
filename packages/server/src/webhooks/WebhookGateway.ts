/** How the edge sends webhook changes: Repository entity commands, through the entity runtime in both modes. */
import { EntityRuntime } from "@grove/bus"
import { Context, Effect, Layer } from "effect"
import { ServerConfig } from "../Config.ts"
import { RepositoryEntity } from "../repos/RepositoryCommands.ts"
import { sender } from "../entities/Sending.ts"

const make = Effect.gen(function*() {
  const config = yield* ServerConfig
  const send = sender(yield* EntityRuntime.EntityRuntime, RepositoryEntity, config.commandTimeoutMs)
  return { add: send("AddWebhook"), remove: send("RemoveWebhook") }
})

export class WebhookGateway extends Context.Service<WebhookGateway, Effect.Success<typeof make>>()("grove/server/webhooks/WebhookGateway") {
  static readonly layer = Layer.effect(WebhookGateway, make)
}
