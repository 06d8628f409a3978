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
  payload: Schema.Unknown
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
  reply: StoredReply
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
 * The command could not be carried out: its handler died, its payload or
 * reply could not be encoded, or the bus failed to take it.
 */
export class CommandFailed extends Schema.TaggedError<CommandFailed>()("CommandFailed", {
  operationId: Schema.String,
  message: Schema.String
}) {}
