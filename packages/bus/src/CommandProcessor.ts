/**
 * The worker of one owned command partition: claims the partition's epoch,
 * then handles its records one at a time, each in ONE database transaction
 * that checks the epoch fence, records the command in the inbox (a command
 * seen before replays its stored reply), runs the handler, stores the reply
 * and records the offset. After the commit it replies to the requesting node
 * and then commits the bus offset. A fenced worker stops: the partition stays
 * idle here until the bus hands it out again.
 */
import { Cause, Clock, Effect, Exit, Option, Schedule, Schema, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { SqlError } from "effect/sql/SqlError"
import { type BusRecord, type BusShape, Headers, type PartitionClaim } from "./Bus.ts"
import { type CommandContext, commandOf, decodeJson, encodeJson, type Entity } from "./Entity.ts"
import * as Inbox from "./Inbox.ts"
import { CommandMessage, type ReplyMessage, type StoredReply } from "./Messages.ts"
import { Outbox } from "./Outbox.ts"
import * as Outboxes from "./Outbox.ts"
import type { OutboxRelay } from "./OutboxRelay.ts"
import * as PartitionFence from "./PartitionFence.ts"

/** A registered entity type, with handlers typed loosely for dispatch. */
export interface Registered {
  readonly entity: Entity
  readonly handlers: Readonly<
    Record<string, (payload: unknown, context: CommandContext) => Effect.Effect<unknown, unknown, SqlClient.SqlClient | Outbox>>
  >
}

export interface ProcessorOptions {
  readonly bus: BusShape
  readonly relay: OutboxRelay
  /** The registration of an entity type; waits a while for it to be registered, `None` after that. */
  readonly lookup: (entityType: string) => Effect.Effect<Option.Option<Registered>>
}

/** Transient database trouble: retry, backing off up to five seconds. */
const retrySql = Schedule.min([Schedule.exponential("50 millis"), Schedule.spaced("5 seconds")])

const decodeCommand = Schema.decodeUnknownEffect(CommandMessage)

const defect = (message: string): StoredReply => ({ _tag: "Defect", message })

interface Outcome {
  readonly reply: StoredReply
  readonly events: number
}

export const worker = (options: ProcessorOptions) => (claim: PartitionClaim) =>
  Effect.gen(function*() {
    const { bus, relay } = options
    const sql = yield* SqlClient.SqlClient
    const { topic, partition } = claim
    const epoch = yield* PartitionFence.claim(topic, partition, bus.nodeId).pipe(
      Effect.tapError((error) => Effect.logWarning("could not claim the partition; retrying", error)),
      Effect.retry(retrySql)
    )
    yield* Effect.logDebug("claimed", { epoch })
    relay.own(partition)

    /** Runs the handler in a savepoint and turns its outcome into the reply to store. */
    const runHandler = Effect.fnUntraced(function*(
      registered: Registered,
      message: CommandMessage,
      context: CommandContext,
      outbox: Outboxes.OutboxShape
    ) {
      const schemas = commandOf(registered.entity, message.command)
      const handler = registered.handlers[message.command]
      if (schemas === undefined || handler === undefined) {
        return defect(`${message.entityType} has no command ${message.command}`)
      }
      const payload = yield* Effect.result(decodeJson(schemas.payload, message.payload))
      if (payload._tag === "Failure") return defect(`invalid payload: ${payload.failure.message}`)
      const exit = yield* sql.withTransaction(handler(payload.success, context)).pipe(
        Effect.provideService(Outbox, outbox),
        Effect.exit
      )
      if (Exit.isSuccess(exit)) {
        return yield* encodeJson(schemas.success, exit.value).pipe(
          Effect.map((value): StoredReply => ({ _tag: "Success", value })),
          Effect.catch((error) => Effect.succeed(defect(`could not encode the reply: ${error.message}`)))
        )
      }
      if (Cause.hasInterruptsOnly(exit.cause)) return yield* Effect.interrupt
      const failure = Cause.findErrorOption(exit.cause)
      if (Option.isNone(failure)) return defect(Cause.pretty(exit.cause))
      if (failure.value instanceof SqlError) {
        // Transient: the whole command is retried. Otherwise a bug in the handler.
        if (failure.value.isRetryable) return yield* failure.value
        return defect(`database error in the handler: ${failure.value.message}`)
      }
      if (schemas.error === undefined) return defect(`unexpected failure: ${Cause.pretty(exit.cause)}`)
      return yield* encodeJson(schemas.error, failure.value).pipe(
        Effect.map((error): StoredReply => ({ _tag: "Failure", error })),
        Effect.catch((error) => Effect.succeed(defect(`could not encode the error: ${error.message}`)))
      )
    })

    /** The command's transaction. */
    const transact = (record: BusRecord, message: CommandMessage, registered: Registered) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* PartitionFence.check(topic, partition, epoch, record.offset)
        const entry = {
          commandId: message.commandId,
          entityType: message.entityType,
          entityId: message.entityId,
          command: message.command,
          partition
        }
        const previous = yield* Inbox.begin(entry)
        if (Option.isSome(previous)) return { reply: previous.value, events: 0 } satisfies Outcome
        let events = 0
        const outbox = Outboxes.forCommand(sql, { partition, key: record.key, onAppend: () => events++ })
        const context: CommandContext = { ...entry, epoch, nodeId: bus.nodeId }
        const reply = yield* runHandler(registered, message, context, outbox)
        yield* Inbox.complete(message.commandId, reply)
        return { reply, events } satisfies Outcome
      }))

    const answer = (record: BusRecord, commandId: string, reply: StoredReply) =>
      Effect.gen(function*() {
        const deadline = Number(record.headers[Headers.deadline] ?? Number.POSITIVE_INFINITY)
        // Nobody waits past the deadline: the caller reads the outcome from the inbox.
        if ((yield* Clock.currentTimeMillis) > deadline) return
        const value: ReplyMessage = { type: "grove.reply", v: 1, commandId, reply }
        yield* bus.reply(record, value)
      }).pipe(Effect.catch((error) => Effect.logWarning("could not send a reply", error)))

    const handle = (record: BusRecord) =>
      Effect.gen(function*() {
        const decoded = yield* Effect.result(decodeCommand(record.value))
        if (decoded._tag === "Failure") {
          yield* Effect.logWarning("skipped a record that is not a command", { offset: record.offset })
          return yield* claim.commit(record.offset)
        }
        const message = decoded.success
        const registered = yield* options.lookup(message.entityType)
        if (Option.isNone(registered)) {
          // Not stored: another node (or a later start) may know the entity type.
          yield* Effect.logError("no handlers for entity type", { entityType: message.entityType })
          yield* answer(record, message.commandId, defect(`unknown entity type ${message.entityType}`))
          return yield* claim.commit(record.offset)
        }
        const outcome = yield* transact(record, message, registered.value).pipe(
          Effect.tapError((error) =>
            error._tag === "SqlError" ? Effect.logWarning("command transaction failed; retrying", error) : Effect.void
          ),
          Effect.retry({ schedule: retrySql, while: (error) => error._tag === "SqlError" })
        )
        if (outcome.events > 0) relay.wake()
        // Reply first, then mark the offset: a worker revoked in between leaves the record to the
        // next owner, which finds it in the inbox and sends the stored reply.
        yield* answer(record, message.commandId, outcome.reply)
        yield* claim.commit(record.offset)
      })

    yield* Stream.runForEach(claim.records, handle)
  }).pipe(
    Effect.catchTag("Fenced", (fenced) =>
      Effect.logWarning("fenced: another node claimed a newer epoch; dropping the partition", { epoch: fenced.epoch })),
    // SQL errors are retried forever above; anything else is a bug: log it, leave the partition idle.
    Effect.orDie,
    Effect.catchDefect((defect) => Effect.logError("the partition worker died", defect)),
    Effect.ensuring(Effect.sync(() => options.relay.disown(claim.partition))),
    Effect.annotateLogs({ topic: claim.topic, partition: claim.partition, generation: claim.generation })
  )
