/**
 * The read side both object stores share: key validation, "missing" told apart
 * from a backend failure, a streamed body whose resource (a file descriptor, an
 * in-flight download) is released however the stream ends, and the length
 * check of a range read. A store supplies only how to open and read bytes.
 */
import { Effect, Stream } from "effect"
import { backendError, ObjectNotFound, type ObjectKey, type ObjectStoreError, validateKey } from "./ObjectStore.ts"

/** How a store says "no such object" (ENOENT, HTTP 404). */
export type IsNotFound = (cause: unknown) => boolean

const readFailure = (key: ObjectKey, isNotFound: IsNotFound) => (cause: unknown): ObjectStoreError | ObjectNotFound =>
  isNotFound(cause) ? new ObjectNotFound({ namespace: key.namespace, hash: key.hash }) : backendError("get", key, cause)

export interface StreamSource<H> {
  /** Takes the resource the body needs; it is released when the stream ends, fails or is interrupted. */
  readonly acquire: (key: ObjectKey) => Promise<H>
  readonly release: (resource: H) => Promise<void> | void
  /** The object's bytes, read through the resource; undefined for an empty body. */
  readonly body: (resource: H, key: ObjectKey) => Promise<AsyncIterable<Uint8Array> | undefined>
  readonly isNotFound: IsNotFound
}

export const streamObject = <H>(rawKey: ObjectKey, source: StreamSource<H>): Stream.Stream<Uint8Array, ObjectStoreError | ObjectNotFound> =>
  Stream.unwrap(Effect.gen(function*() {
    const key = yield* validateKey("get", rawKey)
    const failure = readFailure(key, source.isNotFound)
    const resource = yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => source.acquire(key), catch: failure }),
      (resource) => Effect.promise(async () => {
        try {
          await source.release(resource)
        } catch { /* releasing is best effort */ }
      })
    )
    const body = yield* Effect.tryPromise({ try: () => source.body(resource, key), catch: failure })
    if (body === undefined) return Stream.empty
    return Stream.fromAsyncIterable(body, (cause) => backendError("get", key, cause))
  }))

/**
 * `length` bytes of an object from `offset`: `read` answers what it could read
 * (fewer bytes when the object ends first), which fails here as a backend error.
 */
export const readRange = (
  rawKey: ObjectKey,
  length: number,
  read: (key: ObjectKey) => Promise<Uint8Array>,
  isNotFound: IsNotFound
): Effect.Effect<Uint8Array, ObjectStoreError | ObjectNotFound> =>
  Effect.gen(function*() {
    const key = yield* validateKey("get", rawKey)
    const bytes = yield* Effect.tryPromise({ try: () => read(key), catch: readFailure(key, isNotFound) })
    if (bytes.length !== length) return yield* backendError("get", key, new Error(`range returned ${bytes.length} bytes, not ${length}`))
    return bytes
  })
