/**
 * The Organization entity (key: the organization's slug): every change to an organization, its
 * members, groups, service accounts and (on a personal organization) personal keys is one of its
 * commands, run one at a time by the owner of the slug's partition, each in one transaction with
 * its audit row and outbox event.
 */
import { Entity, EntityRuntime } from "@grove/bus"
import * as ApiKeyCommands from "../identity/ApiKeyCommands.ts"
import * as ServiceAccountCommands from "../service-accounts/ServiceAccountCommands.ts"
import * as OrganizationCommands from "./OrganizationCommands.ts"

export const OrganizationEntity = Entity.make("Organization", {
  ...OrganizationCommands.commands,
  ...ServiceAccountCommands.commands,
  ...ApiKeyCommands.commands
})

export const handlers: Entity.Handlers<typeof OrganizationEntity> = {
  ...OrganizationCommands.handlers,
  ...ServiceAccountCommands.handlers,
  ...ApiKeyCommands.handlers
}

/** Registers the handlers with the entity runtime (both modes). */
export const OrganizationEntityHandlers = EntityRuntime.EntityRuntime.register(OrganizationEntity, handlers)
