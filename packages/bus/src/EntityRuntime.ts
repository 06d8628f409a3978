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
import { Context, Duration, Effect, Layer, Option, Schedule, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { Bus, type BusError } from "./Bus.ts"
import type * as BusStatus from "./BusStatus.ts"
import * as CommandProcessor from "./CommandProcessor.ts"
import * as CommandSender from "./CommandSender.ts"
import { decodeReply, type SendError, type SendOptions } from "./CommandSender.ts"
import type { CommandName, Entity, Handlers, Note, Payload, Replied, Success } from "./Entity.ts"
import * as HandlerRegistry from "./HandlerRegistry.ts"
import * as Inbox from "./Inbox.ts"
import type { CommandFailed, CommandIdReused } from "./Messages.ts"
import * as OutboxRelay from "./OutboxRelay.ts"
import * as PartitionHealth from "./PartitionHealth.ts"
import * as TraceContext from "./TraceContext.ts"
import * as Topics from "./Topics.ts"

export type { SendError, SendOptions }
export { decodeReply }

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

const make = Effect.fnUntraced(function*(options: EntityRuntimeOptions) {
  const bus = yield* Bus
  const sql = yield* SqlClient.SqlClient
  const { register, unregister, lookup } = yield* HandlerRegistry.makeRegistry(options.registrationGrace ?? Duration.seconds(30))
  const submitNoted = CommandSender.makeSender({ bus, sql, defaultTimeout: options.timeout ?? Duration.seconds(10) })

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
