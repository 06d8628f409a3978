/**
 * Writes that outlived their request answer 202 with an operation id; this
 * reads what became of them. Only the caller who issued a write may read it.
 */
import type { ApiErrors, ApiSchemas, Caller } from "@grove/api"
import { Context, type Effect } from "effect"

export class Operations extends Context.Service<Operations, {
  readonly get: (
    caller: Caller,
    operationId: string
  ) => Effect.Effect<typeof ApiSchemas.Operation.Type, ApiErrors.NotFound | ApiErrors.ServiceUnavailable>
}>()("grove/server/entities/Operations") {}
