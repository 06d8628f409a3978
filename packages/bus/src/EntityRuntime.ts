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
import { CommandFailed, CommandIdReused, CommandTimeout, ReplyMessage, type StoredReply } from "./Messages.ts"
import * as OutboxRelay from "./OutboxRelay.ts"
import * as PartitionHealth from "./PartitionHealth.ts"
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
}

export type SendError<E extends Entity, C extends CommandName<E>> =
  | Failure<E, C>
  | CommandTimeout
  | CommandFailed
  | CommandIdReused

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
  ) => Effect.Effect<Effect.Effect<Success<E, C>, SendError<E, C>>, CommandFailed | CommandIdReused>
  /**
   * What is known of a command (by its id, the operation id): `None` if it was
   * never sent; its `reply` is `undefined` while it is in flight.
   */
  readonly operation: (operationId: string) => Effect.Effect<Option.Option<Inbox.Operation>, SqlError>
  /** What this node's partition workers report: stalls and dead workers. */
  readonly health: () => PartitionHealth.HealthReport
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
  /**
   * The bus keeps no messages across a restart (the embedded, in-process bus):
   * at start, commands still in flight in the inbox are settled as failed,
   * since they are gone and were never applied. Only for a single node.
   */
  readonly settleInFlightOnStart?: boolean | undefined
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
      const failed = (message: string, settled: boolean) => new CommandFailed({ operationId: commandId, message, settled })
      const schemas = commandOf(entity, command)
      if (schemas === undefined) return yield* failed(`${entity.name} has no command ${command}`, false)
      const encoded = yield* encodeJson(schemas.payload, payload).pipe(
        Effect.mapError((error) => failed(`could not encode the payload: ${error.message}`, false))
      )
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
      const earlier = yield* Inbox.register(request).pipe(
        Effect.provideService(SqlClient.SqlClient, sql),
        Effect.mapError((error) => failed(`could not record the command: ${error.message}`, false))
      )
      if (Option.isSome(earlier)) {
        const before = earlier.value
        const same = before.owner === request.owner && before.fingerprint === request.fingerprint &&
          before.entityType === entity.name && before.entityId === entityId && before.command === command
        if (!same) {
          return yield* new CommandIdReused({ operationId: commandId })
        }
        // Handled before: its answer, without the bus. In flight: sent again below (the inbox handles it once).
        if (before.reply !== undefined) return decodeReply(entity, command, commandId, before.reply)
      }
      const pending = yield* bus.request({
        topic: Topics.commands,
        key,
        value: { type: "grove.command", v: 1, commandId, entityType: entity.name, entityId, command, payload: encoded },
        headers: { "command-id": commandId }
      }, sendOptions?.timeout ?? defaultTimeout).pipe(
        Effect.tapError(() =>
          // The caller is told to retry: its record goes, so a retry under the same id is sent afresh. Should
          // the bus have taken it after all, the inbox still applies it once.
          Option.isSome(earlier)
            ? Effect.void
            : Inbox.forget(commandId).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.ignore)
        ),
        Effect.mapError((error) => failed(`could not send the command: ${error.message}`, false))
      )
      return pending.await.pipe(
        Effect.catchTag("RequestTimeout", () => Effect.fail(new CommandTimeout({ operationId: commandId }))),
        Effect.flatMap((record) => decodeReplyMessage(record.value)),
        Effect.catchTag("SchemaError", (error) => Effect.fail(failed(`could not decode the reply: ${error.message}`, false))),
        Effect.flatMap((message) => decodeReply(entity, command, commandId, message.reply))
      )
    })

  const send: EntityRuntimeShape["send"] = (entity, entityId, command, payload, sendOptions) =>
    Effect.flatten(submit(entity, entityId, command, payload, sendOptions))

  const operation: EntityRuntimeShape["operation"] = (operationId) =>
    Inbox.read(operationId).pipe(Effect.provideService(SqlClient.SqlClient, sql))

  const health = PartitionHealth.make()
  if (options.host ?? true) {
    if (options.settleInFlightOnStart === true) {
      const settled = yield* Inbox.settleInFlight({
        _tag: "Defect",
        message: "the server stopped before this write was carried out; nothing was applied"
      }).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)
      if (settled > 0) yield* Effect.logWarning(`settled ${settled} writes lost in a restart as failed`)
    }
    const relay = yield* OutboxRelay.make(options.relay)
    yield* bus.consume(
      options.group ?? defaultGroup,
      Topics.commands,
      CommandProcessor.worker({ bus, relay, lookup, health })
    )
    const retention = options.retention ?? Duration.days(7)
    yield* Effect.forkScoped(
      Effect.all([Inbox.prune(retention), OutboxRelay.prune(retention)]).pipe(
        Effect.catch((error) => Effect.logWarning("could not prune the inbox and outbox", error)),
        Effect.repeat(Schedule.spaced(Duration.hours(1)))
      )
    )
  }

  return {
    nodeId: bus.nodeId,
    send,
    submit,
    operation,
    health: health.report,
    register,
    unregister
  } satisfies EntityRuntimeShape
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
