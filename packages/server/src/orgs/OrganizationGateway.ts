/**
 * How the HTTP edge sends Organization commands: through the entity runtime to the owner of the
 * slug's partition, in embedded and cluster mode alike.
 */
import { Context, Effect, Layer } from "effect"
import { organizationSlice } from "../entities/EntitySlices.ts"
import { gatewaySender } from "../entities/Sending.ts"
import * as OrganizationCommands from "./OrganizationCommands.ts"

const make = Effect.gen(function*() {
  const send = yield* gatewaySender(organizationSlice(OrganizationCommands.commands))
  return {
    create: send("Create"),
    update: send("Update"),
    remove: send("Delete"),
    addMember: send("AddMember"),
    setRole: send("SetRole"),
    removeMember: send("RemoveMember"),
    createGroup: send("CreateGroup"),
    deleteGroup: send("DeleteGroup"),
    addGroupMember: send("AddGroupMember"),
    removeGroupMember: send("RemoveGroupMember"),
    setQuota: send("SetQuota")
  }
})

export class OrganizationGateway extends Context.Service<OrganizationGateway, Effect.Success<typeof make>>()(
  "grove/server/orgs/OrganizationGateway"
) {
  static readonly layer = Layer.effect(OrganizationGateway, make)
}
