/**
 * Following a command whose answer did not come in time (202: it may still apply): a runner reserved for it
 * (a manual start's `startOn`, the dispatcher's claim) waits, apart from the request, for the command's stored
 * reply. The command itself starts nothing after its deadline (`until`, epoch ms), so once that is well past
 * and no reply came, nothing will start: the runner is given back.
 */
import type { EntityRuntime, Inbox } from "@grove/bus"
import { Effect, Option } from "effect"

/** How long past `until` an unanswered command is still followed (the nodes' clocks, a commit in progress). */
export const FOLLOW_MARGIN_MS = 30_000

/** The command is pending or its answer was lost: it may still apply, so its outcome decides. */
export const outcomeUnknown = (error: unknown): boolean => {
  const tag = (error as { readonly _tag?: unknown } | null)?._tag
  return tag === "CommandPending" || tag === "CommandUnavailable"
}

/**
 * What `decide` makes of the command's reply once it is stored (undefined for a failure reply), or undefined
 * when no reply came well after `until`.
 */
export const outcomeOf = <A>(
  runtime: EntityRuntime.EntityRuntimeShape,
  commandId: string,
  until: number,
  decide: (success: unknown) => A | undefined
): Effect.Effect<A | undefined> =>
  Effect.gen(function*() {
    while (true) {
      const operation = yield* runtime.operation(commandId).pipe(Effect.orElseSucceed(() => Option.none<Inbox.Operation>()))
      const reply = Option.isSome(operation) ? operation.value.reply : undefined
      if (reply !== undefined) return reply._tag === "Success" ? decide(reply.value) : undefined
      if (Date.now() > until + FOLLOW_MARGIN_MS) return undefined
      yield* Effect.sleep("500 millis")
    }
  })
