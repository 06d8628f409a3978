/**
 * The sending side of the entity runtime: a command goes to the partition of its entity's key on the bus
 * (recorded in the inbox first when its id may have been used before), and its reply comes back decoded into
 * the command's success or typed error, with the handler's note when the reply came live.
 */
import { Duration, Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { type BusShape, BusError } from "./Bus.ts"
import { type CommandSchemas, commandOf, decodeJson, decodeJsonSync, encodeJson } from "./Entity.ts"
import type { CommandName, Entity, Failure, Note, Payload, Replied, Success } from "./Entity.ts"
import * as Inbox from "./Inbox.ts"
import { CommandFailed, CommandIdReused, CommandTimeout, ReplyMessage, type StoredReply } from "./Messages.ts"
import * as TraceContext from "./TraceContext.ts"
import * as Topics from "./Topics.ts"

export interface SendOptions {
  /** The command's id (an idempotency key): the same id is handled at most once. Defaults to a new UUID. */
  readonly commandId?: string | undefined
  /** How long to wait for the reply; defaults to the runtime's `timeout`. */
  readonly timeout?: Duration.Input | undefined
  /** Who sends the command (recorded; `Inbox.Operation.owner`). */
  readonly owner?: string | undefined
  /**
   * What the request was (a hash). A `commandId` already recorded with another
   * owner or fingerprint fails with `CommandIdReused` instead of replaying.
   */
  readonly fingerprint?: string | undefined
  /**
   * `commandId` is new, made by the caller just now (so it can follow the outcome): sent as a default id is,
   * with no inbox row written ahead (the owner writes it in the command's transaction).
   */
  readonly fresh?: boolean | undefined
}

export type SendError<E extends Entity, C extends CommandName<E>> =
  | Failure<E, C>
  | CommandTimeout
  | CommandFailed
  | CommandIdReused

/** A command the bus has not taken within this long is answered as unavailable (retryable). */
const PUBLISH_TIMEOUT = Duration.seconds(5)

/** Turns a stored reply into the command's typed outcome. */
export const decodeReply = <E extends Entity, C extends CommandName<E>>(
  entity: E,
  command: C,
  operationId: string,
  reply: StoredReply
): Effect.Effect<Success<E, C>, Failure<E, C> | CommandFailed> => {
  const schemas = commandOf(entity, command)
  const failed = (message: string) => Effect.fail(new CommandFailed({ operationId, message, settled: true }))
  if (schemas === undefined) return failed(`${entity.name} has no command ${command}`)
  switch (reply._tag) {
    case "Success":
      return decodeJson(schemas.success, reply.value).pipe(
        Effect.catch((error) => failed(`could not decode the reply: ${error.message}`))
      )
    case "Failure":
      return schemas.error === undefined
        ? failed("the reply is an error the command does not declare")
        : decodeJson(schemas.error, reply.error).pipe(
          Effect.catch((error) => failed(`could not decode the error: ${error.message}`)),
          Effect.flatMap((error) => Effect.fail(error as Failure<E, C>))
        )
    case "Defect":
      return failed(reply.message)
  }
}

const decodeReplyMessage = Schema.decodeUnknownEffect(ReplyMessage)

/** A reply read back from the inbox: handled before, so it has no note. */
const unnoted = <A>(value: A): Replied<A, never> => ({ value, note: undefined })

/** A live reply's note, or `undefined` when the command has no note schema or it does not decode (it only saves a read). */
const decodeNote = <E extends Entity, C extends CommandName<E>>(schemas: CommandSchemas, note: unknown): Note<E, C> | undefined => {
  if (schemas.note === undefined) return undefined
  const decoded = decodeJsonSync(schemas.note, note)
  return Option.isSome(decoded) ? decoded.value as Note<E, C> : undefined
}

/**
 * Sends commands on `bus`: the outer effect puts the command on the bus (commands submitted one after another
 * are handled in that order), the inner one waits for its outcome.
 */
export const makeSender = (options: { readonly bus: BusShape; readonly sql: SqlClient.SqlClient; readonly defaultTimeout: Duration.Input }) => {
  const { bus, sql, defaultTimeout } = options
  const submitNoted = <E extends Entity, C extends CommandName<E>>(
    entity: E,
    entityId: string,
    command: C,
    payload: Payload<E, C>,
    sendOptions: SendOptions | undefined
  ): Effect.Effect<Effect.Effect<Replied<Success<E, C>, Note<E, C>>, SendError<E, C>>, CommandFailed | CommandIdReused> =>
    Effect.gen(function*() {
      const commandId = sendOptions?.commandId ?? randomUUID()
      const failed = (message: string, settled: boolean) => new CommandFailed({ operationId: commandId, message, settled })
      const schemas = commandOf(entity, command)
      if (schemas === undefined) return yield* failed(`${entity.name} has no command ${command}`, false)
      const encoded = yield* encodeJson(schemas.payload, payload).pipe(
        Effect.mapError((error) => failed(`could not encode the payload: ${error.message}`, false))
      )
      // The bus is known to be down: say so now (503, retry) rather than wait for a reply that cannot come.
      const reachable = bus.status()
      if (!reachable.reachable) return yield* failed(`the message bus cannot be reached: ${reachable.error ?? "no answer"}`, false)
      const key = entity.partitionKey(entityId)
      const request: Inbox.CommandRequest = {
        commandId,
        entityType: entity.name,
        entityId,
        command,
        partition: bus.partitionFor(Topics.commands, key),
        owner: sendOptions?.owner,
        fingerprint: sendOptions?.fingerprint
      }
      yield* Effect.annotateCurrentSpan({ "grove.command_id": commandId, "messaging.destination.partition.id": String(request.partition) })
      const recordRequest = Inbox.register(request).pipe(
        Effect.provideService(SqlClient.SqlClient, sql),
        Effect.mapError((error) => failed(`could not record the command: ${error.message}`, false))
      )
      // A fresh id cannot have been used before: its row is written by the owner, in the command's transaction
      // (from the owner and fingerprint the message carries), or here once the caller stops waiting for it.
      const fresh = sendOptions?.commandId === undefined || sendOptions.fresh === true
      const earlier = fresh ? Option.none<Inbox.Operation>() : yield* recordRequest
      if (Option.isSome(earlier)) {
        const before = earlier.value
        const same = before.owner === request.owner && before.fingerprint === request.fingerprint &&
          before.entityType === entity.name && before.entityId === entityId && before.command === command
        if (!same) {
          return yield* new CommandIdReused({ operationId: commandId })
        }
        // Handled before: its answer, without the bus. In flight: sent again below (the inbox handles it once).
        if (before.reply !== undefined) return Effect.map(decodeReply(entity, command, commandId, before.reply), unnoted)
      }
      // The sending span's traceparent (none while tracing is off): the owner's command span continues the trace.
      const trace = yield* TraceContext.outgoing
      const pending = yield* bus.request({
        topic: Topics.commands,
        key,
        value: {
          type: "grove.command",
          v: 1,
          commandId,
          entityType: entity.name,
          entityId,
          command,
          payload: encoded,
          ...(request.owner === undefined ? {} : { owner: request.owner }),
          ...(request.fingerprint === undefined ? {} : { fingerprint: request.fingerprint })
        },
        headers: { ...trace, "command-id": commandId }
      }, sendOptions?.timeout ?? defaultTimeout).pipe(
        // A broker that went away a moment ago (before the probe saw it) can hold a publish for long.
        Effect.timeoutOrElse({
          duration: PUBLISH_TIMEOUT,
          orElse: () => Effect.fail(new BusError({ message: "the message bus did not take the command in time" }))
        }),
        Effect.tapError(() =>
          // The caller is told to retry: its record goes, so a retry under the same id is sent afresh. Should
          // the bus have taken it after all, the inbox still applies it once.
          Option.isSome(earlier) || fresh
            ? Effect.void
            : Inbox.forget(commandId).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.ignore)
        ),
        Effect.mapError((error) => failed(`could not send the command: ${error.message}`, false))
      )
      return pending.await.pipe(
        // The caller may ask for the outcome by its id now: the row exists (in flight) from here on.
        Effect.catchTag("RequestTimeout", () =>
          (fresh ? Inbox.recordSent(request).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.ignore) : Effect.void).pipe(
            Effect.andThen(Effect.fail(new CommandTimeout({ operationId: commandId })))
          )),
        Effect.flatMap((record) => decodeReplyMessage(record.value)),
        Effect.catchTag("SchemaError", (error) => Effect.fail(failed(`could not decode the reply: ${error.message}`, false))),
        Effect.flatMap((message) =>
          Effect.map(decodeReply(entity, command, commandId, message.reply), (value) => ({
            value,
            note: message.note === undefined ? undefined : decodeNote<E, C>(schemas, message.note)
          })))
      )
    })
  return submitNoted
}
