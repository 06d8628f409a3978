/**
 * The Organization entity's personal-key commands (keyed by the user's personal organization), so a
 * key's creation and revocation are written with their audit row and outbox event in one transaction.
 */
import type { Entity } from "@grove/bus"

export const commands = {} satisfies Record<string, Entity.CommandSchemas>

export const handlers: Entity.Handlers<Entity.Entity<"Organization", typeof commands>> = {}
