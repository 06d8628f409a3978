/**
 * The object store: immutable, content-addressed objects keyed by
 * `{ namespace, hash }` (the namespace is the organization, the dedup
 * boundary). Bodies are streamed both ways, so an object is never held whole in
 * memory, and a put is all-or-nothing: readers never see a partial object.
 * Implementations: `ObjectStoreLocal` (embedded) and `ObjectStoreS3` (cluster).
 */
import { Context, Effect, Schema } from "effect"
import type { Stream } from "effect"

/** An organization id: lowercase letters, digits, `_` and `-`, at most 64 characters, starting with a letter or digit. */
export const NAMESPACE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/
/** A 256-bit content hash in lowercase hex. */
export const HASH_PATTERN = /^[0-9a-f]{64}$/

export const ObjectKey = Schema.Struct({
  namespace: Schema.String.check(Schema.isPattern(NAMESPACE_PATTERN)),
  hash: Schema.String.check(Schema.isPattern(HASH_PATTERN))
})
export type ObjectKey = typeof ObjectKey.Type

export type Operation = "put" | "get" | "has" | "size" | "delete" | "list"

export class ObjectNotFound extends Schema.TaggedError<ObjectNotFound>()("ObjectNotFound", {
  namespace: Schema.String,
  hash: Schema.String
}) {}

/**
 * `InvalidKey`: the key does not match the patterns above (a caller bug or bad
 * input, never retryable). `Backend`: the filesystem or S3 failed.
 */
export class ObjectStoreError extends Schema.TaggedError<ObjectStoreError>()("ObjectStoreError", {
  operation: Schema.Literals(["put", "get", "has", "size", "delete", "list"]),
  reason: Schema.Literals(["InvalidKey", "Backend"]),
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

export interface PutResult {
  /** The object's size in bytes (the stored one when it already existed). */
  readonly size: number
  /** False when the object already existed; the body was then not read. */
  readonly created: boolean
}

export interface ObjectStoreShape {
  /** Stores the body under `key` unless an object is already there (content addressing makes them equal). */
  readonly put: <E, R>(
    key: ObjectKey,
    body: Stream.Stream<Uint8Array, E, R>
  ) => Effect.Effect<PutResult, ObjectStoreError | E, R>
  readonly get: (key: ObjectKey) => Stream.Stream<Uint8Array, ObjectStoreError | ObjectNotFound>
  /** `length` bytes from `offset` (a chunk inside a pack); fails when the object is shorter. */
  readonly getRange: (key: ObjectKey, offset: number, length: number) => Effect.Effect<Uint8Array, ObjectStoreError | ObjectNotFound>
  readonly has: (key: ObjectKey) => Effect.Effect<boolean, ObjectStoreError>
  readonly size: (key: ObjectKey) => Effect.Effect<number, ObjectStoreError | ObjectNotFound>
  /** Removes the object; succeeds when it is already absent. */
  readonly delete: (key: ObjectKey) => Effect.Effect<void, ObjectStoreError>
  /** The namespaces that hold objects (gc empties those of organizations this database recorded deleted). */
  readonly namespaces: Effect.Effect<ReadonlyArray<string>, ObjectStoreError>
  /** Removes every object of the namespace, answering how many; 0 when it holds none. */
  readonly deleteNamespace: (namespace: string) => Effect.Effect<number, ObjectStoreError>
}

export class ObjectStore extends Context.Service<ObjectStore, ObjectStoreShape>()("grove/storage/ObjectStore") {}

const isValidKey = Schema.is(ObjectKey)

/** Keys reach paths and S3 keys, so every operation re-checks them at runtime, whatever the static type says. */
export const validateKey = (operation: Operation, key: unknown): Effect.Effect<ObjectKey, ObjectStoreError> =>
  isValidKey(key) ? Effect.succeed(key) : Effect.fail(
    new ObjectStoreError({
      operation,
      reason: "InvalidKey",
      message: "an object key needs a namespace matching [a-z0-9][a-z0-9_-]{0,63} and a hash of 64 lowercase hex digits"
    })
  )

/** A namespace as `validateKey` checks it (it reaches a directory or an S3 prefix). */
export const validateNamespace = (namespace: string): Effect.Effect<string, ObjectStoreError> =>
  NAMESPACE_PATTERN.test(namespace) ? Effect.succeed(namespace) : Effect.fail(
    new ObjectStoreError({ operation: "delete", reason: "InvalidKey", message: "a namespace must match [a-z0-9][a-z0-9_-]{0,63}" })
  )

/** A failure of the backend listing or deleting a namespace. */
export const namespaceError = (operation: Operation, namespace: string, cause: unknown): ObjectStoreError =>
  new ObjectStoreError({
    operation,
    reason: "Backend",
    message: `${operation} ${namespace}/ failed: ${cause instanceof Error ? cause.message : String(cause)}`,
    cause
  })

/** A failure of the backend, with the operation and key in the message for the logs. */
export const backendError = (operation: Operation, key: ObjectKey, cause: unknown): ObjectStoreError =>
  new ObjectStoreError({
    operation,
    reason: "Backend",
    message: `${operation} ${key.namespace}/${key.hash} failed: ${
      cause instanceof Error ? cause.message : String(cause)
    }`,
    cause
  })
