/**
 * An entity type: its name, its commands (payload, success and error schema
 * per command) and the partition key of an entity id. Commands of entities
 * with the same partition key are handled one at a time, in order.
 *
 * ```ts
 * const Repository = Entity.make("Repository", {
 *   Create: { payload: CreateRepository, success: Repository, error: RepositoryExists },
 *   Delete: { payload: Schema.Struct({}), success: Schema.Void }
 * })
 * // a branch `owner/name:branch` shares its repository's partition
 * const Branch = Entity.make("Branch", { ... }, { partitionKey: (id) => id.slice(0, id.indexOf(":")) })
 * ```
 */
import { type Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import type { Outbox } from "./Outbox.ts"

/** A schema whose codec needs no services. */
// oxlint-disable-next-line no-explicit-any
export type AnySchema = Schema.Codec<any, any, never, never>

export interface CommandSchemas {
  readonly payload: AnySchema
  readonly success: AnySchema
  /** The command's typed (domain) error; none if omitted. */
  readonly error?: AnySchema
  /**
   * What a handler tells the sending node besides its success (`noted`), e.g. a row's version as written for
   * the node's cache: it goes with the live reply only. It is never stored with the reply, so a replay or a
   * read of the operation has none, and it is never part of what the caller is answered.
   */
  readonly note?: AnySchema
}

export interface Entity<Name extends string = string, Commands extends Record<string, CommandSchemas> = Record<string, CommandSchemas>> {
  readonly name: Name
  readonly commands: Commands
  readonly partitionKey: (entityId: string) => string
}

export type CommandName<E extends Entity> = keyof E["commands"] & string
export type Payload<E extends Entity, C extends CommandName<E>> = E["commands"][C]["payload"]["Type"]
export type Success<E extends Entity, C extends CommandName<E>> = E["commands"][C]["success"]["Type"]
export type Failure<E extends Entity, C extends CommandName<E>> = E["commands"][C] extends
  { readonly error: infer S extends AnySchema } ? S["Type"] : never

export type Note<E extends Entity, C extends CommandName<E>> = E["commands"][C] extends
  { readonly note: infer S extends AnySchema } ? S["Type"] : never

/** A command's outcome as its sender gets it: the success, and the handler's note when the reply is live. */
export interface Replied<A, N> {
  readonly value: A
  /** `undefined` for a reply read back from the inbox (a replay), or when the handler gave none. */
  readonly note: N | undefined
}

const NotedTypeId = "~@grove/bus/Entity/Noted"

/** A handler's success with a note for the sending node (see `CommandSchemas.note`). */
export interface Noted<A, N> {
  readonly [NotedTypeId]: typeof NotedTypeId
  readonly value: A
  readonly note: N
}

/** The success `value` of a command whose schemas have a `note`, with `note` for the sending node only. */
export const noted = <A, N>(value: A, note: N): Noted<A, N> => ({ [NotedTypeId]: NotedTypeId, value, note })

export const isNoted = (u: unknown): u is Noted<unknown, unknown> =>
  typeof u === "object" && u !== null && (u as Record<string, unknown>)[NotedTypeId] === NotedTypeId

/** A handler's success type without its note. */
export type Unnoted<T> = T extends Noted<infer A, unknown> ? A : T

/** A handler's success without its note (for code that runs a handler directly, as tests do). */
export const successOf = <T>(outcome: T): Unnoted<T> => (isNoted(outcome) ? outcome.value : outcome) as Unnoted<T>

/** What a handler knows about the command it runs. */
export interface CommandContext {
  readonly commandId: string
  readonly entityType: string
  readonly entityId: string
  readonly command: string
  readonly partition: number
  /**
   * The partition's epoch on this node. Anything a node caches about an
   * entity is valid only for the epoch it was loaded in: a new epoch means
   * another node may have written in between.
   */
  readonly epoch: number
  readonly nodeId: string
}

/**
 * One handler per command. It runs inside the command's database
 * transaction (use `SqlClient` as usual; an `Outbox` appends events to the
 * same transaction). Failing with the command's error rolls back what it
 * wrote and stores the error as the reply; a `SqlError` retries the command.
 */
export type Handlers<E extends Entity> = {
  readonly [C in CommandName<E>]: (
    payload: Payload<E, C>,
    context: CommandContext
  ) => Effect.Effect<Success<E, C> | Noted<Success<E, C>, Note<E, C>>, Failure<E, C> | SqlError, SqlClient.SqlClient | Outbox>
}

export const make = <const Name extends string, const Commands extends Record<string, CommandSchemas>>(
  name: Name,
  commands: Commands,
  options: { readonly partitionKey?: ((entityId: string) => string) | undefined } = {}
): Entity<Name, Commands> => ({ name, commands, partitionKey: options.partitionKey ?? ((entityId) => entityId) })

const codecs = new WeakMap<AnySchema, Schema.Codec<unknown, Schema.Json>>()

/** The schema's canonical JSON codec, built once per schema. */
const json = (schema: AnySchema): Schema.Codec<unknown, Schema.Json> => {
  let codec = codecs.get(schema)
  if (codec === undefined) {
    codec = Schema.toCodecJson(schema) as Schema.Codec<unknown, Schema.Json>
    codecs.set(schema, codec)
  }
  return codec
}

export const encodeJson = (schema: AnySchema, value: unknown) => Schema.encodeUnknownEffect(json(schema))(value)
export const decodeJson = (schema: AnySchema, value: unknown) => Schema.decodeUnknownEffect(json(schema))(value)
export const decodeJsonSync = (schema: AnySchema, value: unknown) => Schema.decodeUnknownOption(json(schema))(value)

/** The schemas of `command`, if the entity has it. */
export const commandOf = (entity: Entity, command: string): CommandSchemas | undefined =>
  Object.hasOwn(entity.commands, command) ? entity.commands[command] : undefined
