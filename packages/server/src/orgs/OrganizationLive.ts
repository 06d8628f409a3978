/** The Organization entity's handlers and the gateways to it, for the server's wiring. */
import { Layer } from "effect"
import { OrganizationEntityHandlers } from "./OrganizationEntity.ts"
import { ServiceAccountGateway } from "../service-accounts/ServiceAccountGateway.ts"
import { OrganizationGateway } from "./OrganizationGateway.ts"

export const OrganizationEntityLive = Layer.mergeAll(OrganizationEntityHandlers, OrganizationGateway.layer, ServiceAccountGateway.layer)
