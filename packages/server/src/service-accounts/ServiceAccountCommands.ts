/**
 * The Organization entity's service-account commands: accounts and their keys.
 */
import type { Entity } from "@grove/bus"

export const commands = {} satisfies Record<string, Entity.CommandSchemas>

export const handlers: Entity.Handlers<Entity.Entity<"Organization", typeof commands>> = {}
