/**
 * The Organization entity's own commands: the organization, its members and groups.
 */
import type { Entity } from "@grove/bus"

export const commands = {} satisfies Record<string, Entity.CommandSchemas>

export const handlers: Entity.Handlers<Entity.Entity<"Organization", typeof commands>> = {}
