/** How the site routes send the site's commands to the Organization entity (key: the slug). */
import { Context, Effect, Layer } from "effect"
import { organizationSlice } from "../entities/EntitySlices.ts"
import { gatewaySender } from "../entities/Sending.ts"
import * as SiteCommands from "./SiteCommands.ts"

const make = Effect.gen(function*() {
  const send = yield* gatewaySender(organizationSlice(SiteCommands.commands))
  return { set: send("SetSite"), remove: send("DeleteSite") }
})

export class SiteGateway extends Context.Service<SiteGateway, Effect.Success<typeof make>>()("grove/server/sites/SiteGateway") {
  static readonly layer = Layer.effect(SiteGateway, make)
}
