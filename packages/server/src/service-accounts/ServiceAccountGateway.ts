/** How the HTTP edge sends service-account and personal-key commands to the Organization entity. */
import { EntityRuntime } from "@grove/bus"
import { Context, Effect, Layer } from "effect"
import { ServerConfig } from "../Config.ts"
import { sender } from "../entities/Sending.ts"
import { OrganizationEntity } from "../orgs/OrganizationEntity.ts"

const make = Effect.gen(function*() {
  const config = yield* ServerConfig
  const send = sender(yield* EntityRuntime.EntityRuntime, OrganizationEntity, config.commandTimeoutMs)
  return {
    create: send("CreateServiceAccount"),
    update: send("UpdateServiceAccount"),
    remove: send("DeleteServiceAccount"),
    createKey: send("CreateServiceAccountKey"),
    revokeKey: send("RevokeServiceAccountKey"),
    createPersonalKey: send("CreatePersonalKey"),
    revokePersonalKey: send("RevokePersonalKey")
  }
})

export class ServiceAccountGateway extends Context.Service<ServiceAccountGateway, Effect.Success<typeof make>>()(
  "grove/server/service-accounts/ServiceAccountGateway"
) {
  static readonly layer = Layer.effect(ServiceAccountGateway, make)
}
