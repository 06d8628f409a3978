/** How the edge sends webhook changes: Repository entity commands, through the entity runtime in both modes. */
import { Context, Effect, Layer } from "effect"
import { repositorySlice } from "../entities/EntitySlices.ts"
import { gatewaySender } from "../entities/Sending.ts"
import * as WebhookCommands from "./WebhookCommands.ts"

const make = Effect.gen(function*() {
  const send = yield* gatewaySender(repositorySlice(WebhookCommands.commands))
  return { add: send("AddWebhook"), remove: send("RemoveWebhook") }
})

export class WebhookGateway extends Context.Service<WebhookGateway, Effect.Success<typeof make>>()("grove/server/webhooks/WebhookGateway") {
  static readonly layer = Layer.effect(WebhookGateway, make)
}
