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
import { Clock, Context, Deferred, Duration, Effect, Layer, Option, Schedule, Schema, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import { Bus, BusError } from "./Bus.ts"
import type * as BusStatus from "./BusStatus.ts"
import * as CommandProcessor from "./CommandProcessor.ts"
import type { Registered } from "./CommandProcessor.ts"
import { type CommandSchemas, commandOf, decodeJson, decodeJsonSync, encodeJson } from "./Entity.ts"
import type { CommandName, Entity, Failure, Handlers, Note, Payload, Replied, Success } from "./Entity.ts"
import * as Inbox from "./Inbox.ts"
import { CommandFailed, CommandIdReused, CommandTimeout, ReplyMessage, type StoredReply } from "./Messages.ts"
import * as OutboxRelay from "./OutboxRelay.ts"
import * as PartitionHealth from "./PartitionHealth.ts"
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
   * Like `send`, with the handler's note for this node (`Entity.noted`) when the reply came live from
   * the handler; a replayed reply (the command was handled before) has none.
   */
  readonly sendNoted: <E extends Entity, C extends CommandName<E>>(
    entity: E,
    entityId: string,
    command: C,
    payload: Payload<E, C>,
    options?: SendOptions
  ) => Effect.Effect<Replied<Success<E, C>, Note<E, C>>, SendError<E, C>>
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
  /** What this node's bus and partition workers report: see `RuntimeHealth`. */
  readonly health: () => RuntimeHealth
  readonly register: <E extends Entity>(entity: E, handlers: Handlers<E>) => Effect.Effect<void>
  readonly unregister: (entity: Entity) => Effect.Effect<void>
}

/** The node's command side, for health: it is ready when the bus answers and every partition it is given is served. */
export interface RuntimeHealth extends PartitionHealth.HealthReport {
  /** Whether this node hosts command partitions (a client-only node just sends). */
  readonly host: boolean
  readonly bus: Pick<BusStatus.BusStatus, "reachable" | "since" | "error">
  /** This node in the command partitions' consumer group (hosting nodes only). */
  readonly group?: BusStatus.GroupStatus | undefined
  /** Partitions assigned to this node that no live worker has claimed. */
  readonly unserved: ReadonlyArray<number>
}

export interface EntityRuntimeOptions {
  /** Host command partitions (run handlers, relay the outbox). A client-only node only sends. Default true. */
  readonly host?: boolean | undefined
  /** Default reply timeout of `send`. Default 10 seconds. */
  readonly timeout?: Duration.Input | undefined
  /**
   * For this long after the runtime starts, a command for an entity type not registered yet waits for
   * its handlers (they register as the node starts). After that an unknown entity type is settled as
   * failed and dead-lettered at once. Default 30 seconds.
   */
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
  /** Command transactions this node runs at once, over all its partitions (keep it below the database pool's size). Default 4. */
  readonly concurrentCommands?: number | undefined
}

export const defaultGroup = "grove.entities"

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

const make = Effect.fnUntraced(function*(options: EntityRuntimeOptions) {
  const bus = yield* Bus
  const sql = yield* SqlClient.SqlClient
  const defaultTimeout = options.timeout ?? Duration.seconds(10)
  const grace = options.registrationGrace ?? Duration.seconds(30)

  const registry = new Map<string, Registered>()
  /** Entity types registered at some point: one gone again is being stopped with the node, not unknown. */
  const known = new Set<string>()
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
      known.add(entity.name)
      return Deferred.succeed(waiterOf(entity.name), undefined)
    })

  const unregister: EntityRuntimeShape["unregister"] = (entity) =>
    Effect.sync(() => {
      registry.delete(entity.name)
      waiting.delete(entity.name)
    })

  const startedAt = yield* Clock.currentTimeMillis
  const lookup = (entityType: string) =>
    Effect.gen(function*() {
      const found = registry.get(entityType)
      if (found !== undefined) return Option.some(found)
      // Unregistered while the node stops: the worker ends (its drain waits for that), the next owner handles it.
      if (known.has(entityType)) return yield* new CommandProcessor.Stopping({ entityType })
      const left = startedAt + Duration.toMillis(Duration.fromInputUnsafe(grace)) - (yield* Clock.currentTimeMillis)
      if (left <= 0) return Option.none()
      return yield* Deferred.await(waiterOf(entityType)).pipe(
        Effect.timeoutOption(Duration.millis(left)),
        Effect.map(() => Option.fromNullishOr(registry.get(entityType)))
      )
    })

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

  const submit: EntityRuntimeShape["submit"] = (entity, entityId, command, payload, sendOptions) =>
    Effect.map(submitNoted(entity, entityId, command, payload, sendOptions), Effect.map((replied) => replied.value))

  // One span from the send to the reply (only while tracing is on): the request's side of the command.
  const sendNoted: EntityRuntimeShape["sendNoted"] = (entity, entityId, command, payload, sendOptions) =>
    Effect.flatten(submitNoted(entity, entityId, command, payload, sendOptions)).pipe(
      TraceContext.span("EntityRuntime.send", {
        kind: "producer",
        attributes: { "grove.entity_type": entity.name, "grove.entity_id": entityId, "grove.command": command }
      })
    )

  const send: EntityRuntimeShape["send"] = (entity, entityId, command, payload, sendOptions) =>
    Effect.map(sendNoted(entity, entityId, command, payload, sendOptions), (replied) => replied.value)

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
      CommandProcessor.worker({ bus, relay, lookup, health, transactions: yield* Semaphore.make(options.concurrentCommands ?? 4) })
    )
    const retention = options.retention ?? Duration.days(7)
    yield* Effect.forkScoped(
      Effect.all([Inbox.prune(retention), OutboxRelay.prune(retention)]).pipe(
        Effect.catch((error) => Effect.logWarning("could not prune the inbox and outbox", error)),
        Effect.repeat(Schedule.spaced(Duration.hours(1)))
      )
    )
  }

  const host = options.host ?? true
  const groupName = options.group ?? defaultGroup
  const runtimeHealth = (): RuntimeHealth => {
    const report = health.report()
    const { groups, ...reachability } = bus.status()
    const group = host ? groups.find((g) => g.group === groupName && g.topic === Topics.commands) : undefined
    const claimed = new Set(report.claimed.map((claim) => claim.partition))
    return { ...report, host, bus: reachability, group, unserved: (group?.assigned ?? []).filter((p) => !claimed.has(p)) }
  }

  return {
    nodeId: bus.nodeId,
    send,
    sendNoted,
    submit,
    operation,
    health: runtimeHealth,
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
