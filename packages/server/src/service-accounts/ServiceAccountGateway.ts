/** How the HTTP edge sends service-account commands to the Organization entity. */
import { Context, Effect, Layer } from "effect"
import { organizationSlice } from "../entities/EntitySlices.ts"
import { gatewaySender } from "../entities/Sending.ts"
import * as ServiceAccountCommands from "./ServiceAccountCommands.ts"

const make = Effect.gen(function*() {
  const send = yield* gatewaySender(organizationSlice(ServiceAccountCommands.commands))
  return {
    create: send("CreateServiceAccount"),
    update: send("UpdateServiceAccount"),
    remove: send("DeleteServiceAccount"),
    createKey: send("CreateServiceAccountKey"),
    revokeKey: send("RevokeServiceAccountKey")
  }
})

export class ServiceAccountGateway extends Context.Service<ServiceAccountGateway, Effect.Success<typeof make>>()(
  "grove/server/service-accounts/ServiceAccountGateway"
) {
  static readonly layer = Layer.effect(ServiceAccountGateway, make)
}
