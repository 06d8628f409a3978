/**
 * The command inbox: one row per command id, written in the command's
 * transaction together with its reply, so a redelivered or retried command
 * gets the stored reply instead of acting twice, and a caller whose request
 * timed out can read the outcome later.
 */
import { Duration, Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { StoredReply } from "./Messages.ts"

export interface InboxEntry {
  readonly commandId: string
  readonly entityType: string
  readonly entityId: string
  readonly command: string
  readonly partition: number
}

const decodeReply = Schema.decodeUnknownEffect(StoredReply)

/**
 * Records the command as being handled in this transaction. `None` if it is
 * new; otherwise the reply stored when it was handled before.
 */
export const begin = Effect.fnUntraced(function*(entry: InboxEntry) {
  const sql = yield* SqlClient.SqlClient
  const inserted = yield* sql`
    INSERT INTO command_inbox (command_id, entity_type, entity_id, command, partition)
    VALUES (${entry.commandId}, ${entry.entityType}, ${entry.entityId}, ${entry.command}, ${entry.partition})
    ON CONFLICT (command_id) DO NOTHING
    RETURNING command_id`
  if (inserted.length > 0) return Option.none()
  const rows = yield* sql<{ readonly reply: unknown }>`SELECT reply FROM command_inbox WHERE command_id = ${entry.commandId}`
  return Option.some(yield* decodeReply(rows[0]?.reply).pipe(Effect.orDie))
})

/** Stores the reply of a command begun in this transaction. */
export const complete = Effect.fnUntraced(function*(commandId: string, reply: StoredReply) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`UPDATE command_inbox SET reply = ${JSON.stringify(reply)}::jsonb, completed_at = now()
    WHERE command_id = ${commandId}`
})

export interface Operation extends Omit<InboxEntry, "partition"> {
  readonly reply: StoredReply
}

/** The stored outcome of a command, or `None` while it has not been handled (or is unknown). */
export const read = Effect.fnUntraced(function*(commandId: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{
    readonly entityType: string
    readonly entityId: string
    readonly command: string
    readonly reply: unknown
  }>`SELECT entity_type AS "entityType", entity_id AS "entityId", command, reply
     FROM command_inbox WHERE command_id = ${commandId} AND reply IS NOT NULL`
  const row = rows[0]
  if (row === undefined) return Option.none<Operation>()
  const reply = yield* decodeReply(row.reply).pipe(Effect.orDie)
  return Option.some<Operation>({ commandId, entityType: row.entityType, entityId: row.entityId, command: row.command, reply })
})

/** Forgets commands older than `age`; keep it longer than the commands topic's retention. */
export const prune = Effect.fnUntraced(function*(age: Duration.Input) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DELETE FROM command_inbox WHERE created_at < now() - ${Duration.toMillis(age)} * interval '1 millisecond'`
})
