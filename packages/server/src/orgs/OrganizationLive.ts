/** The Organization entity's handlers and the gateway to it, for the server's wiring. */
import { Layer } from "effect"
import { OrganizationEntityHandlers } from "./OrganizationEntity.ts"
import { OrganizationGateway } from "./OrganizationGateway.ts"

export const OrganizationEntityLive = Layer.merge(OrganizationEntityHandlers, OrganizationGateway.layer)
