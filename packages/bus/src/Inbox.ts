/**
 * The command inbox: one row per command id. The sender records the command
 * when it sends it (who sent it, and the fingerprint of the request an
 * idempotency key was first used for); the partition owner stores the reply
 * in the command's own transaction, so a redelivered or retried command gets
 * the stored reply instead of acting twice, and a caller whose request timed
 * out can read the outcome later. A row without a reply is a command in flight.
 */
import { Duration, Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { Fragment } from "effect/sql/Statement"
import { StoredReply } from "./Messages.ts"
import type { OutboxRow } from "./Outbox.ts"
import type { RelayedRow } from "./OutboxRelay.ts"
import * as PartitionFence from "./PartitionFence.ts"

export interface InboxEntry {
  readonly commandId: string
  readonly entityType: string
  readonly entityId: string
  readonly command: string
  readonly partition: number
}

/** A command as its sender records it. */
export interface CommandRequest extends InboxEntry {
  /** Who sent it: only they may read its outcome. */
  readonly owner?: string | undefined
  /** What the request was; the same command id with another fingerprint is refused. */
  readonly fingerprint?: string | undefined
}

/** What is known of a command id: who sent it, for what, and its reply once it was handled. */
export interface Operation extends Omit<InboxEntry, "partition"> {
  readonly owner: string | undefined
  readonly fingerprint: string | undefined
  /** `undefined` while the command is in flight. */
  readonly reply: StoredReply | undefined
}

const decodeReply = Schema.decodeUnknownEffect(StoredReply)

/**
 * PostgreSQL text holds neither NUL nor unpaired surrogates; what a command
 * carries is recorded with those escaped, so even a malformed command can be
 * settled.
 */
export const storable = (text: string): string => text.replaceAll("\u0000", "\\u0000").toWellFormed()

interface Row {
  readonly entityType: string
  readonly entityId: string
  readonly command: string
  readonly owner: string | null
  readonly fingerprint: string | null
  readonly reply: unknown
}

const toOperation = (commandId: string, row: Row) =>
  Effect.gen(function*() {
    const reply = row.reply === null ? undefined : yield* decodeReply(row.reply).pipe(Effect.orDie)
    return {
      commandId,
      entityType: row.entityType,
      entityId: row.entityId,
      command: row.command,
      owner: row.owner ?? undefined,
      fingerprint: row.fingerprint ?? undefined,
      reply
    } satisfies Operation
  })

/**
 * The sender records a command before putting it on the bus. `None` if the
 * id is new; otherwise what is known of the earlier command with this id.
 */
export const register = Effect.fnUntraced(function*(request: CommandRequest) {
  const sql = yield* SqlClient.SqlClient
  const inserted = yield* sql`
    INSERT INTO command_inbox (command_id, entity_type, entity_id, command, partition, owner, fingerprint)
    VALUES (${request.commandId}, ${request.entityType}, ${request.entityId}, ${request.command}, ${request.partition},
      ${request.owner ?? null}, ${request.fingerprint ?? null})
    ON CONFLICT (command_id) DO NOTHING
    RETURNING command_id`
  if (inserted.length > 0) return Option.none<Operation>()
  return yield* read(request.commandId)
})

/**
 * The sender records a fresh command (an id only it knows) once it stops waiting for the reply, so its
 * caller can read the outcome. The owner may have recorded it first; one of an older version leaves out
 * who sent it and the fingerprint: those are filled in.
 */
export const recordSent = Effect.fnUntraced(function*(request: CommandRequest) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    INSERT INTO command_inbox (command_id, entity_type, entity_id, command, partition, owner, fingerprint)
    VALUES (${request.commandId}, ${request.entityType}, ${request.entityId}, ${request.command}, ${request.partition},
      ${request.owner ?? null}, ${request.fingerprint ?? null})
    ON CONFLICT (command_id) DO UPDATE SET owner = COALESCE(command_inbox.owner, excluded.owner),
      fingerprint = COALESCE(command_inbox.fingerprint, excluded.fingerprint)
    WHERE (command_inbox.owner IS NULL AND excluded.owner IS NOT NULL)
      OR (command_inbox.fingerprint IS NULL AND excluded.fingerprint IS NOT NULL)`
})

/**
 * In the command's transaction: checks the partition's epoch fence and takes the command's row (recording
 * it if its sender did not), in one statement. Fails with `Fenced` when the epoch is no longer current;
 * `None` if the command is to be handled now; otherwise the reply stored when it was handled before.
 */
export const begin = Effect.fnUntraced(function*(entry: CommandRequest, fence: PartitionFence.FenceCheck) {
  const sql = yield* SqlClient.SqlClient
  // Commands of one partition are handled one at a time, under the partition's fence row lock: a plain read
  // of the row its sender recorded is enough (no second write of it). Every data-modifying part of a WITH
  // runs whatever the outer query reads; the row is inserted only while the fence holds and none was read.
  const [taken] = yield* sql<{ readonly current: boolean; readonly recorded: boolean; readonly inserted: boolean; readonly reply: unknown }>`
    WITH fence AS (${PartitionFence.advance(sql, fence)}),
      recorded AS (SELECT reply FROM command_inbox WHERE command_id = ${entry.commandId}),
      inserted AS (INSERT INTO command_inbox (command_id, entity_type, entity_id, command, partition, owner, fingerprint)
        SELECT ${entry.commandId}, ${entry.entityType}, ${entry.entityId}, ${entry.command}, ${entry.partition},
          ${entry.owner ?? null}::text, ${entry.fingerprint ?? null}::text
        WHERE EXISTS (SELECT 1 FROM fence) AND NOT EXISTS (SELECT 1 FROM recorded)
        ON CONFLICT (command_id) DO NOTHING RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM fence) AS current, EXISTS (SELECT 1 FROM recorded) AS recorded,
      EXISTS (SELECT 1 FROM inserted) AS inserted, (SELECT reply FROM recorded) AS reply`
  if (taken?.current !== true) return yield* new PartitionFence.Fenced({ topic: fence.topic, partition: fence.partition, epoch: fence.epoch })
  if (taken.inserted) return Option.none<StoredReply>()
  let reply = taken.reply
  if (!taken.recorded) {
    // Its sender recorded it just now (after this statement's snapshot).
    reply = (yield* sql<{ readonly reply: unknown }>`SELECT reply FROM command_inbox WHERE command_id = ${entry.commandId}`)[0]?.reply ?? null
  }
  if (reply === null || reply === undefined) return Option.none<StoredReply>()
  return Option.some(yield* decodeReply(reply).pipe(Effect.orDie))
})

/**
 * Stores the reply of a command begun in this transaction, and the events its handler appended (`appended`,
 * in order), in one statement. `eventIds`: the outbox rows its handler inserted itself and did not report
 * (`stored`: those it did, as its statement returned them). Returns every one of them as they will commit,
 * in id order (the relay publishes them without reading them again); the statement reads back only the rows
 * not known already.
 */
export const complete = Effect.fnUntraced(function*(
  commandId: string,
  reply: StoredReply,
  eventIds: ReadonlyArray<string> = [],
  appended: ReadonlyArray<OutboxRow> = [],
  stored: ReadonlyArray<RelayedRow> = []
) {
  const sql = yield* SqlClient.SqlClient
  if (eventIds.length === 0 && appended.length === 0) {
    yield* sql`UPDATE command_inbox SET reply = ${JSON.stringify(reply)}::jsonb, completed_at = now()
      WHERE command_id = ${commandId}`
    return stored.length < 2 ? stored : inIdOrder(stored)
  }
  /** The rows of `source` as the relay takes them, in id order: the value the reply's UPDATE returns. */
  const relayed = (source: Fragment) =>
    sql`RETURNING (SELECT json_agg(json_build_object('id', id::text, 'eventId', event_id::text, 'topic', topic, 'key', key,
      'payload', payload) ORDER BY id) FROM ${source}) AS events`
  const inserted = sql`event_outbox WHERE event_id = ANY(${eventIds}::uuid[])`
  const withStored = (rows: ReadonlyArray<RelayedRow> | null | undefined) =>
    stored.length === 0 ? rows ?? [] : inIdOrder([...stored, ...rows ?? []])
  if (appended.length === 0) {
    const [row] = yield* sql<{ readonly events: ReadonlyArray<RelayedRow> | null }>`
      UPDATE command_inbox SET reply = ${JSON.stringify(reply)}::jsonb, completed_at = now()
      WHERE command_id = ${commandId} ${relayed(inserted)}`
    return withStored(row?.events)
  }
  // The statement's own inserts are not in its snapshot of the table: they come back from their RETURNING.
  // Rows go in the order given (ids follow it), after those the handler inserted in earlier statements.
  const [row] = yield* sql<{ readonly events: ReadonlyArray<RelayedRow> | null }>`
    WITH emitted AS (INSERT INTO event_outbox (event_id, partition, topic, key, payload)
        SELECT e.event_id::uuid, e.partition, e.topic, e.key, e.payload::jsonb
        FROM unnest(${appended.map((r) => r.eventId)}::text[], ${appended.map((r) => r.partition)}::int[],
          ${appended.map((r) => r.topic)}::text[], ${appended.map((r) => r.key)}::text[], ${appended.map((r) => r.payload)}::text[])
          WITH ORDINALITY AS e(event_id, partition, topic, key, payload, n)
        ORDER BY e.n
        RETURNING id, event_id, topic, key, payload),
      events AS (SELECT id, event_id, topic, key, payload FROM emitted
        UNION ALL SELECT id, event_id, topic, key, payload FROM ${inserted})
    UPDATE command_inbox SET reply = ${JSON.stringify(reply)}::jsonb, completed_at = now()
    WHERE command_id = ${commandId} ${relayed(sql`events`)}`
  return withStored(row?.events)
})

/** Rows in the table's id order (a bigint as text: by length, then by text). */
const inIdOrder = (rows: ReadonlyArray<RelayedRow>) =>
  [...rows].sort((a, b) => a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))

/**
 * Settles a command that cannot be handled with `reply`, unless it already
 * has one: its fields are stored escaped, so this works for the command whose
 * own fields made `begin` fail. Returns the reply the command now has.
 */
export const settle = Effect.fnUntraced(function*(entry: CommandRequest, reply: StoredReply) {
  const sql = yield* SqlClient.SqlClient
  const optional = (text: string | undefined) => (text === undefined ? null : storable(text))
  const rows = yield* sql<{ readonly reply: unknown }>`
    INSERT INTO command_inbox (command_id, entity_type, entity_id, command, partition, owner, fingerprint, reply, completed_at)
    VALUES (${storable(entry.commandId)}, ${storable(entry.entityType)}, ${storable(entry.entityId)},
      ${storable(entry.command)}, ${entry.partition}, ${optional(entry.owner)}, ${optional(entry.fingerprint)},
      ${JSON.stringify(reply)}::jsonb, now())
    ON CONFLICT (command_id) DO UPDATE SET reply = COALESCE(command_inbox.reply, excluded.reply),
      completed_at = COALESCE(command_inbox.completed_at, excluded.completed_at)
    RETURNING reply`
  return yield* decodeReply(rows[0]?.reply).pipe(Effect.orDie)
})

/** Forgets a command recorded by its sender that never reached the bus (and so has no reply). */
export const forget = Effect.fnUntraced(function*(commandId: string) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DELETE FROM command_inbox WHERE command_id = ${commandId} AND reply IS NULL`
})

/**
 * Settles every command still in flight with `reply`: for a bus that keeps
 * no messages across a restart, those commands are gone and were never
 * applied (their effect and their reply commit together). Returns how many.
 */
export const settleInFlight = Effect.fnUntraced(function*(reply: StoredReply) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql`UPDATE command_inbox SET reply = ${JSON.stringify(reply)}::jsonb, completed_at = now()
    WHERE reply IS NULL RETURNING command_id`
  return rows.length
})

/** What is known of a command id: `None` if it was never sent (or is forgotten). */
export const read = Effect.fnUntraced(function*(commandId: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<Row>`SELECT entity_type AS "entityType", entity_id AS "entityId", command, owner, fingerprint, reply
     FROM command_inbox WHERE command_id = ${commandId}`
  const row = rows[0]
  if (row === undefined) return Option.none<Operation>()
  return Option.some(yield* toOperation(commandId, row))
})

/** Forgets commands older than `age`; keep it longer than the commands topic's retention. */
export const prune = Effect.fnUntraced(function*(age: Duration.Input) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DELETE FROM command_inbox WHERE created_at < now() - ${Duration.toMillis(age)} * interval '1 millisecond'`
})
