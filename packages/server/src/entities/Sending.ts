/**
 * How the features' gateways send entity commands: through the entity runtime to the owner of the
 * entity's partition, in embedded and cluster mode alike, and how the runtime's failures look to them.
 */
import { type Entity, EntityRuntime, type Messages } from "@grove/bus"
import { Data, Duration, Effect } from "effect"
import { ServerConfig } from "../Config.ts"

/** The command did not answer before the deadline; it may still apply. Poll the operation. */
export class CommandPending extends Data.TaggedError("CommandPending")<{ readonly operationId: string }> {}
/** The bus or database could not take the command now; nothing was applied. */
export class CommandUnavailable extends Data.TaggedError("CommandUnavailable")<{ readonly message: string }> {}
/** The command was handled and failed (settled: a retry with the same key answers the same); nothing was applied. */
export class CommandNotApplied extends Data.TaggedError("CommandNotApplied")<{ readonly operationId: string }> {}
/** The Idempotency-Key was first used for another request. */
export class IdempotencyKeyReused extends Data.TaggedError("IdempotencyKeyReused")<{ readonly operationId: string }> {}

/** How a command failed on its way, besides its own typed errors. */
export type GatewayFailure = CommandPending | CommandUnavailable | CommandNotApplied | IdempotencyKeyReused

/** Who sends a write and what it was: see `CallerContext.writeRequest`. */
export interface WriteRequest {
  /** The command id an Idempotency-Key makes; a new one otherwise. */
  readonly commandId?: string | undefined
  /** The caller (`CallerContext.principalKey`): only they may read the operation. */
  readonly owner: string
  /** With an Idempotency-Key: the request it is bound to. */
  readonly fingerprint?: string | undefined
  /** `commandId` was made new for this send (no Idempotency-Key): no inbox row is written ahead (SendOptions.fresh). */
  readonly fresh?: boolean | undefined
}

/** The entity runtime's send options for a write request. */
const sendOptions = (request: WriteRequest | undefined, timeoutMs: number) => ({
  commandId: request?.commandId,
  owner: request?.owner,
  fingerprint: request?.fingerprint,
  fresh: request?.fresh,
  timeout: Duration.millis(timeoutMs)
})

/**
 * The one way a gateway sends a command: `sender(runtime, entity, timeoutMs)("Create")` is a function of
 * `(entityId, payload, request?)` answering the command's success, its typed error or a `GatewayFailure`.
 */
export const sender = <E extends Entity.Entity>(runtime: EntityRuntime.EntityRuntimeShape, entity: E, timeoutMs: number) =>
<C extends Entity.CommandName<E>>(command: C) =>
(entityId: string, payload: Entity.Payload<E, C>, request?: WriteRequest) =>
  runtime.send(entity, entityId, command, payload, sendOptions(request, timeoutMs)).pipe(
    Effect.mapError((error) => toGatewayError<Entity.Failure<E, C>>(error))
  )

/** Like `sender`, answering the success with the handler's note for this node (`Entity.Replied`). */
export const notedSender = <E extends Entity.Entity>(runtime: EntityRuntime.EntityRuntimeShape, entity: E, timeoutMs: number) =>
<C extends Entity.CommandName<E>>(command: C) =>
(entityId: string, payload: Entity.Payload<E, C>, request?: WriteRequest) =>
  runtime.sendNoted(entity, entityId, command, payload, sendOptions(request, timeoutMs)).pipe(
    Effect.mapError((error) => toGatewayError<Entity.Failure<E, C>>(error))
  )

/** What every gateway starts from: `(yield* gatewaySender(slice))("Create")`, with the configured command timeout. */
export const gatewaySender = <E extends Entity.Entity>(entity: E) =>
  Effect.gen(function*() {
    const config = yield* ServerConfig
    return sender(yield* EntityRuntime.EntityRuntime, entity, config.commandTimeoutMs)
  })

/** `gatewaySender` for commands whose handlers note something for this node (`notedSender`). */
export const gatewayNotedSender = <E extends Entity.Entity>(entity: E) =>
  Effect.gen(function*() {
    const config = yield* ServerConfig
    return notedSender(yield* EntityRuntime.EntityRuntime, entity, config.commandTimeoutMs)
  })

type SendFailure = Messages.CommandTimeout | Messages.CommandFailed | Messages.CommandIdReused

/** A command's typed error passes through; the runtime's failures become the gateway's. */
export const toGatewayError = <E>(e: E | SendFailure): E | GatewayFailure => {
  const tagged = e as { readonly _tag?: unknown }
  switch (tagged._tag) {
    case "CommandTimeout":
      return new CommandPending({ operationId: (e as Messages.CommandTimeout).operationId })
    case "CommandIdReused":
      return new IdempotencyKeyReused({ operationId: (e as Messages.CommandIdReused).operationId })
    case "CommandFailed": {
      const failed = e as Messages.CommandFailed
      return failed.settled
        ? new CommandNotApplied({ operationId: failed.operationId })
        : new CommandUnavailable({ message: `the write could not be carried out: ${failed.message}` })
    }
    default:
      return e as E
  }
}
