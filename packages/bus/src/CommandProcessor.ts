/**
 * The worker of one owned command partition: claims the partition's epoch,
 * then handles its records one at a time, each in ONE database transaction
 * that checks the epoch fence, records the command in the inbox (a command
 * seen before replays its stored reply), runs the handler, stores the reply
 * and records the offset. After the commit it replies to the requesting node
 * and then commits the bus offset.
 *
 * The claim protocol: a partition assigned to this node is served by this
 * node, whatever epochs were claimed before. A worker that finds itself fenced
 * (another node, or a worker of a past generation, claimed a newer epoch)
 * re-reads the group's assignment: while the partition is still this node's
 * it claims again, with a newer epoch, and carries on with the same record;
 * only once the partition is no longer this node's does it stop. Every
 * transition is logged with partition, generation and epoch.
 *
 * No record stalls the partition (see `CommandFailures`): what can pass is
 * retried with backoff (a lost database forever, the node reporting the
 * stall); a command that fails the same way every time is settled as failed
 * and answered; a record that cannot be decoded or settled goes to the
 * dead-letter topic. Either way the worker moves on to the next record.
 */
import { Cause, Clock, Data, Effect, Option, Schema, Semaphore, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { type BusRecord, type BusShape, Headers, type PartitionClaim } from "./Bus.ts"
import * as CommandFailures from "./CommandFailures.ts"
import * as CommandMetrics from "./CommandMetrics.ts"
import * as CommandRetries from "./CommandRetries.ts"
import * as DeadLetters from "./DeadLetters.ts"
import { type CommandContext, commandOf } from "./Entity.ts"
import { defect, type Registered, Refused, runHandler } from "./HandlerRun.ts"
import * as Inbox from "./Inbox.ts"
import { CommandMessage, type ReplyMessage, type StoredReply } from "./Messages.ts"
import * as Outboxes from "./Outbox.ts"
import type { OutboxRelay, RelayedRow } from "./OutboxRelay.ts"
import * as PartitionFence from "./PartitionFence.ts"
import type { PartitionHealth } from "./PartitionHealth.ts"
import * as TraceContext from "./TraceContext.ts"

export type { Registered }

export interface ProcessorOptions {
  readonly bus: BusShape
  readonly relay: OutboxRelay
  readonly health: PartitionHealth
  /**
   * Command transactions of this node's partitions at a time. Below the database pool's size: a
   * handler may read through another pooled connection inside its transaction, and a burst on every
   * partition at once (a backlog after a broker restart) must not take every connection and wait
   * for one more.
   */
  readonly transactions: Semaphore.Semaphore
  /**
   * The registration of an entity type; `None` if there is none (waits for it only while the node starts).
   * Fails with `Stopping` for a type whose handlers were released because the node stops.
   */
  readonly lookup: (entityType: string) => Effect.Effect<Option.Option<Registered>, Stopping>
}

/**
 * The node stops: the handlers of `entityType` are gone (a server releases them before its bus consumer
 * drains). The worker leaves the record, and the rest of its partition, to the partition's next owner.
 */
export class Stopping extends Data.TaggedError("Stopping")<{ readonly entityType: string }> {}

const decodeCommand = Schema.decodeUnknownEffect(CommandMessage)

interface Outcome {
  readonly reply: StoredReply
  /** The handler's note for the sender, encoded: only when it ran now (never stored, so never replayed). */
  readonly note?: unknown
  /**
   * The outbox rows its transaction committed, for the relay (none for a refused command, rolled back);
   * `undefined` when not known (a reply stored before: an earlier attempt may have committed rows that
   * never came back; a command settled as failed or dead-lettered).
   */
  readonly events: ReadonlyArray<RelayedRow> | undefined
}

const outcomeOf = (reply: StoredReply, events: Outcome["events"], note?: unknown): Outcome =>
  note === undefined ? { reply, events } : { reply, events, note }

export const worker = (options: ProcessorOptions) => (claim: PartitionClaim) =>
  Effect.gen(function*() {
    const { bus, relay, health } = options
    const sql = yield* SqlClient.SqlClient
    const { topic, partition } = claim
    const persist = CommandRetries.persistent(health, partition)
    const deadLetter = DeadLetters.deadLetters({ bus, health, topic, partition })

    /** Claims the partition with a newer epoch than any before, retrying until the database lets it. */
    const claimEpoch = Effect.gen(function*() {
      const claimed = yield* persist("claiming the partition", PartitionFence.claim(topic, partition, bus.nodeId))
      if (claimed._tag === "Poison") return yield* Effect.die(new Error(`could not claim the partition: ${claimed.message}`))
      health.claimed(partition, claimed.value)
      yield* Effect.logInfo("claimed the partition", { epoch: claimed.value })
      return claimed.value
    }).pipe(Effect.catchTag("Fenced", Effect.die)) // a claim is never fenced: it takes the newest epoch
    let epoch = yield* claimEpoch
    relay.own(partition)
    /** Claims in a row without a record settled in between: two nodes both believe they own the partition. */
    let reclaims = 0

    /**
     * Fenced: claims again while the partition is still this node's (true), or says
     * it is not (false). A worker of a past generation that claimed late, or a node
     * that lost its membership without knowing yet, cannot keep the partition from
     * the node it is assigned to: the assignee always claims again.
     */
    const reclaim = (fenced: PartitionFence.Fenced) =>
      Effect.gen(function*() {
        const mine = yield* claim.owned
        if (!mine) {
          yield* Effect.logWarning("fenced, and the partition is no longer assigned here: stopping its worker", {
            epoch: fenced.epoch
          })
          return false
        }
        // Two nodes that both believe they own it take turns, more slowly each time, until one learns it does not.
        if (reclaims > 0) yield* Effect.sleep(CommandFailures.backoff(reclaims + 1))
        reclaims++
        yield* Effect.logWarning("fenced, but the partition is still assigned here: claiming it again", {
          epoch: fenced.epoch
        })
        epoch = yield* claimEpoch
        return true
      })

    const entryOf = (message: CommandMessage): Inbox.CommandRequest => ({
      commandId: message.commandId,
      entityType: message.entityType,
      entityId: message.entityId,
      command: message.command,
      partition,
      owner: message.owner,
      fingerprint: message.fingerprint
    })

    /** Stores `reply` as the command's, under the fence, in a transaction of its own; a reply stored before wins. */
    const settleFenced = (record: BusRecord, message: CommandMessage, reply: StoredReply) =>
      sql.withTransaction(Effect.andThen(
        PartitionFence.check(topic, partition, epoch, record.offset),
        Inbox.settle(entryOf(message), reply)
      ))

    /**
     * The command's transaction: the fence and the inbox row (one statement), the handler, the reply. A
     * refused command's reply is stored in a second transaction, after the first rolled back.
     */
    const transact = (record: BusRecord, message: CommandMessage, registered: Registered) =>
      sql.withTransaction(Effect.gen(function*() {
        const entry = entryOf(message)
        const previous = yield* Inbox.begin(entry, { topic, partition, epoch, offset: record.offset })
        if (Option.isSome(previous)) return outcomeOf(previous.value, undefined)
        const made: Array<string> = []
        const stored: Array<RelayedRow> = []
        const outbox = Outboxes.forCommand({
          partition,
          key: record.key,
          onRow: (id) => made.push(id),
          // Only a row its handler made here: any other would be published without being in the table.
          onStored: (row) => {
            if (made.includes(row.eventId)) stored.push(row)
          }
        })
        const context: CommandContext = { ...entry, epoch, nodeId: bus.nodeId }
        const { reply, note } = yield* runHandler(registered, message, context, outbox)
        // Rows its handler reported as stored are not read back.
        const unread = stored.length === 0 ? made : made.filter((id) => !stored.some((row) => row.eventId === id))
        const events = yield* Inbox.complete(message.commandId, reply, unread, outbox.appended, stored)
        return outcomeOf(reply, events, note)
      })).pipe(
        Effect.catchIf((error): error is Refused => error instanceof Refused, ({ reply }) =>
          // Under the fence again (the first transaction's lock is gone); a reply stored meanwhile wins. The
          // rolled-back transaction committed no rows (a reply stored before was found by `begin`): none to read.
          settleFenced(record, message, reply).pipe(Effect.map((stored) => outcomeOf(stored, []))))
      )

    /**
     * A command that cannot be carried out: its failure is stored as its reply
     * (in a transaction of its own, its fields escaped) so its operation
     * settles; if even that fails, the record is dead-lettered.
     */
    const settle = (record: BusRecord, message: CommandMessage, reason: string, alsoDeadLetter = false) =>
      Effect.gen(function*() {
        yield* Effect.logError("a command failed; settled as failed", { commandId: Inbox.storable(message.commandId), reason })
        const failed = defect(`the command could not be carried out: ${reason}`)
        const stored = yield* persist(
          "settling a failed command",
          settleFenced(record, message, failed)
        )
        if (stored._tag === "Done") {
          if (alsoDeadLetter) yield* deadLetter(record, reason)
          return outcomeOf(stored.value, undefined)
        }
        yield* deadLetter(record, `${reason}; settling it failed too: ${stored.message}`)
        return outcomeOf(failed, undefined)
      })

    const answer = (record: BusRecord, commandId: string, reply: StoredReply, note: unknown) =>
      Effect.gen(function*() {
        const deadline = Number(record.headers[Headers.deadline] ?? Number.POSITIVE_INFINITY)
        // Nobody waits past the deadline: the caller reads the outcome from the inbox.
        if ((yield* Clock.currentTimeMillis) > deadline) return
        const value: ReplyMessage = note === undefined
          ? { type: "grove.reply", v: 1, commandId, reply }
          : { type: "grove.reply", v: 1, commandId, reply, note }
        yield* bus.reply(record, value)
      }).pipe(Effect.catchCause((cause) => Effect.logWarning("could not send a reply", Cause.squash(cause))))

    /** Why a command cannot be carried out by any handler here, or `undefined` if it can be. */
    const unknownCommand = (message: CommandMessage, registered: Option.Option<Registered>) => {
      if (Option.isNone(registered)) return `unknown entity type ${message.entityType}`
      const known = commandOf(registered.value.entity, message.command) !== undefined &&
        registered.value.handlers[message.command] !== undefined
      return known ? undefined : `${message.entityType} has no command ${message.command}`
    }

    const handleOnce = (record: BusRecord) =>
      Effect.gen(function*() {
        const started = performance.now()
        const decoded = yield* Effect.result(decodeCommand(record.value))
        if (decoded._tag === "Failure") {
          yield* deadLetter(record, `not a command: ${decoded.failure.message}`)
          return yield* claim.commit(record.offset)
        }
        const message = decoded.success
        yield* Effect.annotateCurrentSpan({ "grove.entity_type": message.entityType, "grove.command": message.command })
        const registered = yield* options.lookup(message.entityType)
        const unknown = unknownCommand(message, registered)
        // Settled at once (its operation answers) and set aside: it must not hold the partition.
        const outcome = unknown !== undefined
          ? yield* settle(record, message, unknown, true)
          : yield* persist("a command transaction", options.transactions.withPermit(transact(record, message, Option.getOrThrow(registered)))).pipe(
            Effect.flatMap((attempted) =>
              attempted._tag === "Done" ? Effect.succeed(attempted.value) : settle(record, message, attempted.message)
            )
          )
        reclaims = 0
        // Rows that did not come back are read from the table before any newer ones go from memory.
        if (outcome.events === undefined) relay.wake()
        else relay.committed(partition, outcome.events)
        // Reply first, then mark the offset: a worker revoked in between leaves the record to the
        // next owner, which finds it in the inbox and sends the stored reply.
        yield* answer(record, message.commandId, outcome.reply, outcome.note).pipe(TraceContext.span("EntityRuntime.reply", { kind: "producer" }))
        CommandMetrics.record(
          message.entityType,
          message.command,
          outcome.reply._tag === "Success" ? "success" : outcome.reply._tag === "Failure" ? "failure" : "defect",
          claim.partition,
          (performance.now() - started) / 1000
        )
        yield* claim.commit(record.offset)
      })

    /**
     * The command's span on this node, a child of the sender's span when the record carries its
     * traceparent (only while tracing is on): its transaction and reply are spans inside it.
     */
    const traced = (record: BusRecord) =>
      TraceContext.span("EntityRuntime.command", {
        kind: "consumer",
        parent: TraceContext.incoming(record.headers),
        attributes: {
          "messaging.destination.name": topic,
          "messaging.destination.partition.id": String(partition),
          "grove.command_id": record.headers["command-id"] ?? "",
          "grove.node": bus.nodeId
        }
      })

    /**
     * A fenced record is handled again under the new epoch (its transaction was rolled back). Every line
     * logged while it is handled names its command (the sender's log has the same id).
     */
    const handle = (record: BusRecord): Effect.Effect<boolean, never, SqlClient.SqlClient> =>
      handleOnce(record).pipe(
        traced(record),
        Effect.as(true),
        Effect.catchTag("Fenced", (fenced) =>
          Effect.flatMap(reclaim(fenced), (again) => again ? handle(record) : Effect.succeed(false))),
        // Nothing of it was applied or committed: the next owner starts from it. Ending now (not waiting for
        // the handlers) is what lets the stop's drain see this worker end by itself.
        Effect.catchTag("Stopping", (stopping) =>
          Effect.logInfo("the node is stopping and its handlers are gone: the worker ends, leaving the partition's records to its next owner", {
            offset: String(record.offset),
            entity_type: stopping.entityType
          }).pipe(Effect.as(false))),
        Effect.annotateLogs("command_id", record.headers["command-id"] ?? "")
      )

    // Ends when the partition is no longer this node's, or when the node stops.
    yield* claim.records.pipe(Stream.mapEffect(handle), Stream.takeWhile((going) => going), Stream.runDrain)
  }).pipe(
    Effect.ensuring(Effect.sync(() => options.health.released(claim.partition))),
    Effect.catchCause((cause) => {
      if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
      // Every record is settled one way or another above, so this is a bug: report it (the node is not
      // ready) and die, so `PartitionWorkers` starts the partition again from its committed offset.
      options.health.died(claim.partition, String(Cause.squash(cause)))
      return Effect.logError("the partition worker died; it is started again", cause).pipe(
        Effect.andThen(Effect.failCause(cause))
      )
    }),
    Effect.ensuring(Effect.sync(() => options.relay.disown(claim.partition))),
    Effect.annotateLogs({ topic: claim.topic, partition: claim.partition, generation: claim.generation })
  )
