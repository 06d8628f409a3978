/**
 * The entity types several features share. A feature defines its slice of an entity (its command
 * schemas and handlers) and sends through a slice of its own; `Entities.ts` (the wiring) composes
 * the slices of a type and registers them once. The runtime routes by entity name and command tag,
 * so no entity module imports the features (as Effect's cluster keeps a protocol apart from handlers).
 */
import { Entity } from "@grove/bus"
import { splitBranchKey } from "./CommandSupport.ts"

type Commands = Record<string, Entity.CommandSchemas>

/** The Repository entity: key `owner/name` (case-folded), which is also its partition key. */
export const repositorySlice = <const C extends Commands>(commands: C) => Entity.make("Repository", commands)

/** The Branch entity: key `owner/name:branch`, in its repository's partition (one at a time with its commands). */
export const branchSlice = <const C extends Commands>(commands: C) =>
  Entity.make("Branch", commands, { partitionKey: (entityId) => splitBranchKey(entityId)[0] })

/** The Organization entity: key the organization's slug. */
export const organizationSlice = <const C extends Commands>(commands: C) => Entity.make("Organization", commands)
