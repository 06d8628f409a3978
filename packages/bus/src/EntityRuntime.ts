/**
 * The entity runtime: sends commands to the node that owns their entity's
 * partition and, on the nodes that host partitions, runs the registered
 * handlers (see `CommandProcessor`) and relays the outbox.
 *
 * ```ts
 * // server: handlers, as a Layer
 * const RepositoryHandlers = EntityRuntime.register(Repository, Effect.gen(function*() {
 *   const audit = yield* Audit
 *   return { Create: (payload, ctx) => ..., Delete: (payload, ctx) => ... }
 * }))
 * // an HTTP handler
 * const runtime = yield* EntityRuntime
 * const repo = yield* runtime.send(Repository, "alice/hello", "Create", payload)
 * ```
 */
import { Context, Deferred, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import { Bus, type BusError } from "./Bus.ts"
import * as CommandProcessor from "./CommandProcessor.ts"
import type { Registered } from "./CommandProcessor.ts"
import { commandOf, decodeJson, encodeJson } from "./Entity.ts"
import type { CommandName, Entity, Failure, Handlers, Payload, Success } from "./Entity.ts"
import * as Inbox from "./Inbox.ts"
import { CommandFailed, CommandTimeout, ReplyMessage, type StoredReply } from "./Messages.ts"
import * as OutboxRelay from "./OutboxRelay.ts"
import * as Topics from "./Topics.ts"

export interface SendOptions {
  /** The command's id (an idempotency key): the same id is handled at most once. Defaults to a new UUID. */
  readonly commandId?: string | undefined
  /** How long to wait for the reply; defaults to the runtime's `timeout`. */
  readonly timeout?: Duration.Input | undefined
}

export type SendError<E extends Entity, C extends CommandName<E>> = Failure<E, C> | CommandTimeout | CommandFailed

export interface EntityRuntimeShape {
  readonly nodeId: string
  /**
   * Sends a command and waits for its outcome: the command's success, its
   * typed error, `CommandTimeout` (the command may still be applied: poll
   * `operation`) or `CommandFailed`.
   */
  readonly send: <E extends Entity, C extends CommandName<E>>(
    entity: E,
    entityId: string,
    command: C,
    payload: Payload<E, C>,
    options?: SendOptions
  ) => Effect.Effect<Success<E, C>, SendError<E, C>>
  /**
   * Like `send`, in two steps: the outer effect puts the command on the bus
   * (commands submitted one after another are handled in that order), the
   * inner one waits for the outcome.
   */
  readonly submit: <E extends Entity, C extends CommandName<E>>(
    entity: E,
    entityId: string,
    command: C,
    payload: Payload<E, C>,
    options?: SendOptions
  ) => Effect.Effect<Effect.Effect<Success<E, C>, SendError<E, C>>, CommandFailed>
  /** The stored outcome of a command (by its id, the operation id), or `None` while it is pending. */
  readonly operation: (operationId: string) => Effect.Effect<Option.Option<Inbox.Operation>, SqlError>
  readonly register: <E extends Entity>(entity: E, handlers: Handlers<E>) => Effect.Effect<void>
  readonly unregister: (entity: Entity) => Effect.Effect<void>
}

export interface EntityRuntimeOptions {
  /** Host command partitions (run handlers, relay the outbox). A client-only node only sends. Default true. */
  readonly host?: boolean | undefined
  /** Default reply timeout of `send`. Default 10 seconds. */
  readonly timeout?: Duration.Input | undefined
  /** How long a command for an entity type waits for its handlers to be registered. Default 30 seconds. */
  readonly registrationGrace?: Duration.Input | undefined
  /** The consumer group of the command partitions. */
  readonly group?: string | undefined
  /** Inbox rows (and published outbox rows) are kept this long; at least the commands topic's retention. */
  readonly retention?: Duration.Input | undefined
  readonly relay?: OutboxRelay.OutboxRelayOptions | undefined
}

export const defaultGroup = "grove.entities"

/** Turns a stored reply into the command's typed outcome. */
export const decodeReply = <E extends Entity, C extends CommandName<E>>(
  entity: E,
  command: C,
  operationId: string,
  reply: StoredReply
): Effect.Effect<Success<E, C>, Failure<E, C> | CommandFailed> => {
  const schemas = commandOf(entity, command)
  const failed = (message: string) => Effect.fail(new CommandFailed({ operationId, message }))
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

const make = Effect.fnUntraced(function*(options: EntityRuntimeOptions) {
  const bus = yield* Bus
  const sql = yield* SqlClient.SqlClient
  const defaultTimeout = options.timeout ?? Duration.seconds(10)
  const grace = options.registrationGrace ?? Duration.seconds(30)

  const registry = new Map<string, Registered>()
  const waiting = new Map<string, Deferred.Deferred<void>>()
  const waiterOf = (entityType: string) => {
    let waiter = waiting.get(entityType)
    if (waiter === undefined) {
      waiter = Deferred.makeUnsafe<void>()
      waiting.set(entityType, waiter)
    }
    return waiter
  }

  const register: EntityRuntimeShape["register"] = (entity, handlers) =>
    Effect.suspend(() => {
      registry.set(entity.name, { entity, handlers: handlers as unknown as Registered["handlers"] })
      return Deferred.succeed(waiterOf(entity.name), undefined)
    })

  const unregister: EntityRuntimeShape["unregister"] = (entity) =>
    Effect.sync(() => {
      registry.delete(entity.name)
      waiting.delete(entity.name)
    })

  const lookup = (entityType: string) =>
    Effect.suspend(() => {
      const found = registry.get(entityType)
      if (found !== undefined) return Effect.succeed(Option.some(found))
      return Deferred.await(waiterOf(entityType)).pipe(
        Effect.timeoutOption(grace),
        Effect.map(() => Option.fromNullishOr(registry.get(entityType)))
      )
    })

  const submit: EntityRuntimeShape["submit"] = (entity, entityId, command, payload, sendOptions) =>
    Effect.gen(function*() {
      const commandId = sendOptions?.commandId ?? randomUUID()
      const failed = (message: string) => new CommandFailed({ operationId: commandId, message })
      const schemas = commandOf(entity, command)
      if (schemas === undefined) return yield* failed(`${entity.name} has no command ${command}`)
      const encoded = yield* encodeJson(schemas.payload, payload).pipe(
        Effect.mapError((error) => failed(`could not encode the payload: ${error.message}`))
      )
      const pending = yield* bus.request({
        topic: Topics.commands,
        key: entity.partitionKey(entityId),
        value: { type: "grove.command", v: 1, commandId, entityType: entity.name, entityId, command, payload: encoded },
        headers: { "command-id": commandId }
      }, sendOptions?.timeout ?? defaultTimeout).pipe(
        Effect.mapError((error) => failed(`could not send the command: ${error.message}`))
      )
      return pending.await.pipe(
        Effect.catchTag("RequestTimeout", () => Effect.fail(new CommandTimeout({ operationId: commandId }))),
        Effect.flatMap((record) => decodeReplyMessage(record.value)),
        Effect.catchTag("SchemaError", (error) => Effect.fail(failed(`could not decode the reply: ${error.message}`))),
        Effect.flatMap((message) => decodeReply(entity, command, commandId, message.reply))
      )
    })

  const send: EntityRuntimeShape["send"] = (entity, entityId, command, payload, sendOptions) =>
    Effect.flatten(submit(entity, entityId, command, payload, sendOptions))

  const operation: EntityRuntimeShape["operation"] = (operationId) =>
    Inbox.read(operationId).pipe(Effect.provideService(SqlClient.SqlClient, sql))

  if (options.host ?? true) {
    const relay = yield* OutboxRelay.make(options.relay)
    yield* bus.consume(
      options.group ?? defaultGroup,
      Topics.commands,
      CommandProcessor.worker({ bus, relay, lookup })
    )
    const retention = options.retention ?? Duration.days(7)
    yield* Effect.forkScoped(
      Effect.all([Inbox.prune(retention), OutboxRelay.prune(retention)]).pipe(
        Effect.catch((error) => Effect.logWarning("could not prune the inbox and outbox", error)),
        Effect.repeat(Schedule.spaced(Duration.hours(1)))
      )
    )
  }

  return { nodeId: bus.nodeId, send, submit, operation, register, unregister } satisfies EntityRuntimeShape
})

export class EntityRuntime extends Context.Service<EntityRuntime, EntityRuntimeShape>()("grove/bus/EntityRuntime") {
  /** Sends commands and, unless `host: false`, hosts the command partitions this node owns. */
  static readonly layer = (
    options: EntityRuntimeOptions = {}
  ): Layer.Layer<EntityRuntime, BusError, Bus | SqlClient.SqlClient> =>
    Layer.effect(EntityRuntime, make(options))

  /**
   * Registers the handlers of an entity type while the layer lives. Give
   * the handlers directly or as an effect that builds them (to use services).
   */
  static readonly register = <E extends Entity, Err = never, R = never>(
    entity: E,
    handlers: Handlers<E> | Effect.Effect<Handlers<E>, Err, R>
  ): Layer.Layer<never, Err, EntityRuntime | R> =>
    Layer.effectDiscard(Effect.gen(function*() {
      const runtime = yield* EntityRuntime
      const built = Effect.isEffect(handlers) ? yield* handlers : handlers
      yield* Effect.acquireRelease(runtime.register(entity, built), () => runtime.unregister(entity))
    }))
}
