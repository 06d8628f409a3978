/**
 * Running a command's handler inside its transaction, on the worker of its partition: the payload decoded, the
 * handler's success encoded as the reply to store (its note apart, for the sender only), its declared error or
 * a failure for good as a refusal (`Refused`: the transaction rolls back and the reply is stored on its own).
 * Transient trouble fails the transaction, to be tried again.
 */
import { Cause, Data, Effect, Exit, Option } from "effect"
import type { SqlClient } from "effect/sql"
import * as CommandFailures from "./CommandFailures.ts"
import { type CommandContext, commandOf, decodeJson, encodeJson, type Entity, isNoted } from "./Entity.ts"
import type { CommandMessage, StoredReply } from "./Messages.ts"
import { Outbox } from "./Outbox.ts"
import type * as Outboxes from "./Outbox.ts"

/** A registered entity type, with handlers typed loosely for dispatch. */
export interface Registered {
  readonly entity: Entity
  readonly handlers: Readonly<
    Record<string, (payload: unknown, context: CommandContext) => Effect.Effect<unknown, unknown, SqlClient.SqlClient | Outbox>>
  >
}

/** A handler refused its command (its error, or a failure for good): the transaction rolls back, `reply` is stored. */
export class Refused extends Data.TaggedError("HandlerRefused")<{ readonly reply: StoredReply }> {}

export const defect = (message: string): StoredReply => ({ _tag: "Defect", message })

/** A handler's outcome: the reply to store, and its note for the sender (encoded; never stored). */
export interface Handled {
  readonly reply: StoredReply
  readonly note?: unknown
}
export const handled = (reply: StoredReply, note?: unknown): Handled => (note === undefined ? { reply } : { reply, note })

/**
 * Runs the handler in the command's transaction and turns its outcome into the reply to store (and its
 * note for the sender, which is not stored). A handler that fails with its command's error (or for good)
 * fails the transaction with `Refused`, which rolls back what it wrote: no savepoint round trips around
 * every handler for the rare refusal.
 */
export const runHandler = Effect.fnUntraced(function*(
  registered: Registered,
  message: CommandMessage,
  context: CommandContext,
  outbox: Outboxes.OutboxShape
) {
  const schemas = commandOf(registered.entity, message.command)
  const handler = registered.handlers[message.command]
  if (schemas === undefined || handler === undefined) {
    return handled(defect(`${message.entityType} has no command ${message.command}`))
  }
  const payload = yield* Effect.result(decodeJson(schemas.payload, message.payload))
  if (payload._tag === "Failure") return handled(defect(`invalid payload: ${payload.failure.message}`))
  const exit = yield* handler(payload.success, context).pipe(
    Effect.provideService(Outbox, outbox),
    Effect.exit
  )
  if (Exit.isSuccess(exit)) {
    const success = isNoted(exit.value) ? exit.value.value : exit.value
    const reply = yield* encodeJson(schemas.success, success).pipe(
      Effect.map((value): StoredReply => ({ _tag: "Success", value })),
      Effect.catch((error) => Effect.succeed(defect(`could not encode the reply: ${error.message}`)))
    )
    if (!isNoted(exit.value) || schemas.note === undefined || reply._tag !== "Success") return handled(reply)
    // A note that cannot be encoded is left out: it only saves the sender a read.
    const note = yield* Effect.option(encodeJson(schemas.note, exit.value.note))
    return handled(reply, Option.getOrUndefined(note))
  }
  const verdict = CommandFailures.classify(exit.cause)
  // Transient trouble (or an interruption) fails the whole transaction, to be tried again.
  if (verdict._tag !== "Poison") return yield* Effect.failCause(exit.cause)
  const failure = Cause.findErrorOption(exit.cause)
  const declared = Option.isSome(failure) && schemas.error !== undefined &&
    (failure.value as { _tag?: unknown })._tag !== "SqlError"
  const reply = !declared
    ? defect(`the command failed: ${verdict.message}`)
    : yield* encodeJson(schemas.error!, failure.value).pipe(
      Effect.map((error): StoredReply => ({ _tag: "Failure", error })),
      Effect.catch((error) => Effect.succeed(defect(`could not encode the error: ${error.message}`)))
    )
  return yield* new Refused({ reply })
})

