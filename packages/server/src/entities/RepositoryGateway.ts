/**
 * How the HTTP edge sends Repository commands: through the entity runtime to
 * the partition owner of `owner/name`, in embedded and cluster mode alike.
 */
import type { ApiSchemas } from "@grove/api"
import type { Messages } from "@grove/bus"
import { Context, Data, type Effect } from "effect"
import type * as MergeCommand from "../content/MergeCommand.ts"
import type * as SyncRevert from "../content/SyncRevertCommands.ts"
import type * as Commands from "./RepositoryCommands.ts"

/** The command did not answer before the deadline; it may still apply. Poll the operation. */
export class CommandPending extends Data.TaggedError("CommandPending")<{ readonly operationId: string }> {}
/** The bus or database could not take the command now; nothing was applied. */
export class CommandUnavailable extends Data.TaggedError("CommandUnavailable")<{ readonly message: string }> {}

/** A command's typed error passes through; a timeout becomes a pending operation; a failed send, unavailability. */
export const toGatewayError = <E>(e: E | Messages.CommandTimeout | Messages.CommandFailed): E | CommandPending | CommandUnavailable => {
  const tagged = e as { readonly _tag?: unknown }
  if (tagged._tag === "CommandTimeout") return new CommandPending({ operationId: (e as Messages.CommandTimeout).operationId })
  if (tagged._tag === "CommandFailed") return new CommandUnavailable({ message: `the write could not be carried out: ${(e as Messages.CommandFailed).message}` })
  return e as E
}

type MergeReply = Effect.Effect<typeof MergeCommand.MergeSuccess.Type, MergeCommand.MergeError | CommandPending | CommandUnavailable>
type Landing<A> = Effect.Effect<A, SyncRevert.LandError | CommandPending | CommandUnavailable>
type Reply = Effect.Effect<ApiSchemas.Repository, Commands.RepositoryError | CommandPending | CommandUnavailable>

export class RepositoryGateway extends Context.Service<RepositoryGateway, {
  readonly create: (entityId: string, payload: typeof Commands.CreatePayload.Type, commandId?: string) => Reply
  readonly remove: (entityId: string, payload: typeof Commands.DeletePayload.Type, commandId?: string) => Reply
  readonly setVisibility: (entityId: string, payload: typeof Commands.SetVisibilityPayload.Type, commandId?: string) => Reply
  readonly merge: (entityId: string, payload: typeof MergeCommand.MergePayload.Type, commandId?: string) => MergeReply
  readonly sync: (entityId: string, payload: typeof SyncRevert.SyncPayload.Type, commandId?: string) => Landing<typeof SyncRevert.SyncSuccess.Type>
  readonly revert: (entityId: string, payload: typeof SyncRevert.RevertPayload.Type, commandId?: string) => Landing<typeof SyncRevert.RevertSuccess.Type>
  readonly transfer: (entityId: string, payload: typeof Commands.TransferPayload.Type, commandId?: string) => Reply
}>()("grove/server/entities/RepositoryGateway") {}
