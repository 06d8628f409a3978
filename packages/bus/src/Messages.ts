/**
 * What the entity runtime writes on the bus and in the inbox, and the errors
 * a caller of `send` can get besides the command's own.
 */
import { Schema } from "effect"

/** A command on `grove.commands`, keyed by the entity's partition key. */
export const CommandMessage = Schema.Struct({
  type: Schema.Literal("grove.command"),
  v: Schema.Literal(1),
  commandId: Schema.String,
  entityType: Schema.String,
  entityId: Schema.String,
  command: Schema.String,
  /** Encoded with the command's payload schema. */
  payload: Schema.Unknown,
  /**
   * Who sent it and the fingerprint of its request, for its inbox row: a command sent under a fresh id is
   * not recorded by its sender (the owner records it in the command's transaction).
   */
  owner: Schema.optionalKey(Schema.String),
  fingerprint: Schema.optionalKey(Schema.String)
})
export type CommandMessage = typeof CommandMessage.Type

/**
 * The outcome of a command as stored in the inbox and sent back: the success
 * or the command's typed error, encoded with the command's schemas, or a
 * defect (the handler died, or the command could not be decoded).
 */
export const StoredReply = Schema.Union([
  Schema.TaggedStruct("Success", { value: Schema.Unknown }),
  Schema.TaggedStruct("Failure", { error: Schema.Unknown }),
  Schema.TaggedStruct("Defect", { message: Schema.String })
])
export type StoredReply = typeof StoredReply.Type

/** A reply on `grove.replies`, keyed by the node it goes to. */
export const ReplyMessage = Schema.Struct({
  type: Schema.Literal("grove.reply"),
  v: Schema.Literal(1),
  commandId: Schema.String,
  reply: StoredReply,
  /** The handler's note for this node (encoded with the command's `note` schema); never stored (see `Entity.noted`). */
  note: Schema.optionalKey(Schema.Unknown)
})
export type ReplyMessage = typeof ReplyMessage.Type

/**
 * The reply did not come before the deadline. The command may still be
 * applied later: read its outcome with `operation(operationId)`, and never
 * retry it under a new command id.
 */
export class CommandTimeout extends Schema.TaggedError<CommandTimeout>()("CommandTimeout", {
  operationId: Schema.String
}) {}

/**
 * The command could not be carried out. `settled`: it was handled and failed
 * (its handler died, its payload or reply could not be encoded or stored),
 * and that outcome is stored, so a retry under the same id answers the same;
 * nothing was applied. Otherwise it never reached its partition (the bus or
 * the database could not take it) and may be sent again.
 */
export class CommandFailed extends Schema.TaggedError<CommandFailed>()("CommandFailed", {
  operationId: Schema.String,
  message: Schema.String,
  settled: Schema.Boolean
}) {}

/** The command id (an idempotency key) was used before for another request, or by another sender. */
export class CommandIdReused extends Schema.TaggedError<CommandIdReused>()("CommandIdReused", {
  operationId: Schema.String
}) {}

/** A record of the commands topic that could not be decoded or recorded, set aside with the reason. */
export const DeadLetter = Schema.Struct({
  type: Schema.Literal("grove.dead-letter"),
  v: Schema.Literal(1),
  topic: Schema.String,
  partition: Schema.Number,
  /** The record's offset, as a decimal string. */
  offset: Schema.String,
  key: Schema.String,
  reason: Schema.String,
  /** The record's value, when it is small enough to keep (64 KiB of JSON). */
  record: Schema.optionalKey(Schema.Unknown),
  headers: Schema.Record(Schema.String, Schema.String)
})
export type DeadLetter = typeof DeadLetter.Type
