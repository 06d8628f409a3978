/** How the HTTP edge sends personal-key commands: to the Organization entity of the user's personal organization. */
import { Context, Effect, Layer } from "effect"
import { organizationSlice } from "../entities/EntitySlices.ts"
import { gatewaySender } from "../entities/Sending.ts"
import * as ApiKeyCommands from "./ApiKeyCommands.ts"

const make = Effect.gen(function*() {
  const send = yield* gatewaySender(organizationSlice(ApiKeyCommands.commands))
  return { createPersonalKey: send("CreatePersonalKey"), revokePersonalKey: send("RevokePersonalKey") }
})

export class ApiKeyGateway extends Context.Service<ApiKeyGateway, Effect.Success<typeof make>>()("grove/server/identity/ApiKeyGateway") {
  static readonly layer = Layer.effect(ApiKeyGateway, make)
}
