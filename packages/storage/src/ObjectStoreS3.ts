/**
 * The object store on S3 (cluster mode), through `@aws-sdk/client-s3`. An
 * object is `<namespace>/<hash>` in one bucket.
 *
 * Upload: the body's length is unknown up front, so bytes are gathered into
 * parts of `partSize` (8 MiB by default; at most one part is held in memory).
 * A body that ends within the first part is sent as one PutObject; a longer one
 * as a multipart upload, aborted on any failure or interruption. S3 shows
 * neither until it is complete. Both carry `If-None-Match: *`, so concurrent
 * puts of one object have exactly one creator and an existing object is never
 * overwritten (servers without conditional writes simply overwrite it with the
 * same bytes).
 *
 * The SDK is loaded when a store is made, not when this module is: an embedded
 * server imports the storage package and never needs its tens of MiB.
 */
import { Effect, Exit, Layer, Redacted, Stream } from "effect"
import { readRange, streamObject } from "./ObjectRead.ts"
import {
  backendError,
  ObjectNotFound,
  ObjectStore,
  type ObjectKey,
  namespaceError,
  type ObjectStoreError,
  type Operation,
  validateKey,
  validateNamespace
} from "./ObjectStore.ts"

export interface ObjectStoreS3Options {
  /** Omit for AWS itself. */
  readonly endpoint?: string | undefined
  readonly region: string
  readonly bucket: string
  readonly accessKeyId: string
  readonly secretAccessKey: string | Redacted.Redacted<string>
  /** `bucket` in the path rather than the host name; needed by MinIO and most self-hosted servers. Default true. */
  readonly forcePathStyle?: boolean | undefined
  /** Send and check checksums only when an operation requires them (for servers that do not decode aws-chunked bodies). */
  readonly checksumWhenRequired?: boolean | undefined
  /** Bytes per multipart part, at least 5 MiB (S3's minimum). Default 8 MiB. */
  readonly partSize?: number | undefined
}

const MIN_PART_SIZE = 5 * 1024 * 1024
const DEFAULT_PART_SIZE = 8 * 1024 * 1024

const statusOf = (error: unknown): number | undefined => {
  if (typeof error !== "object" || error === null || !("$metadata" in error)) return undefined
  const metadata = error.$metadata as { httpStatusCode?: number } | undefined
  return metadata?.httpStatusCode
}

/** The object already exists: a conditional write lost (412) or raced another one (409). */
const isConditionalFailure = (error: unknown) => statusOf(error) === 412 || statusOf(error) === 409

export const make = Effect.fn("ObjectStoreS3.make")(function*(options: ObjectStoreS3Options) {
  const partSize = Math.max(options.partSize ?? DEFAULT_PART_SIZE, MIN_PART_SIZE)
  const bucket = options.bucket
  const sdk = yield* Effect.promise(() => import("@aws-sdk/client-s3"))
  const client = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new sdk.S3Client({
        ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
        region: options.region,
        forcePathStyle: options.forcePathStyle ?? true,
        credentials: {
          accessKeyId: options.accessKeyId,
          secretAccessKey: Redacted.isRedacted(options.secretAccessKey)
            ? Redacted.value(options.secretAccessKey)
            : options.secretAccessKey
        },
        ...(options.checksumWhenRequired === true
          ? { requestChecksumCalculation: "WHEN_REQUIRED", responseChecksumValidation: "WHEN_REQUIRED" }
          : {})
      })
    ),
    (client) => Effect.sync(() => client.destroy())
  )

  const objectName = (key: ObjectKey) => `${key.namespace}/${key.hash}`

  const send = <A>(operation: Operation, key: ObjectKey, f: (signal: AbortSignal) => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: (cause) => backendError(operation, key, cause) })

  /** The object's size, or undefined when it does not exist. */
  const head = (operation: Operation, key: ObjectKey) =>
    send(operation, key, (abortSignal) =>
      client.send(new sdk.HeadObjectCommand({ Bucket: bucket, Key: objectName(key) }), { abortSignal }).then(
        (response) => response.ContentLength ?? 0,
        (error: unknown) => {
          if (statusOf(error) === 404) return undefined
          throw error
        }
      ))

  /** Sends one part-sized buffer; returns false when the object already existed. */
  const putWhole = (key: ObjectKey, body: Uint8Array) =>
    send("put", key, (abortSignal) =>
      client.send(
        new sdk.PutObjectCommand({
          Bucket: bucket,
          Key: objectName(key),
          Body: body,
          ContentLength: body.byteLength,
          IfNoneMatch: "*"
        }),
        { abortSignal }
      ).then(() => true, (error: unknown) => {
        if (isConditionalFailure(error)) return false
        throw error
      }))

  const put = <E, R>(
    rawKey: ObjectKey,
    body: Stream.Stream<Uint8Array, E, R>
  ): Effect.Effect<{ size: number; created: boolean }, ObjectStoreError | E, R> =>
    Effect.gen(function*() {
      const key = yield* validateKey("put", rawKey)
      const existing = yield* head("put", key)
      if (existing !== undefined) return { size: existing, created: false }

      let pending: Array<Uint8Array> = []
      let pendingBytes = 0
      let size = 0
      let uploadId: string | undefined
      const parts: Array<{ PartNumber: number; ETag: string }> = []

      const takePending = () => {
        const bytes = Buffer.concat(pending, pendingBytes)
        pending = []
        pendingBytes = 0
        return bytes
      }

      const uploadPart = Effect.gen(function*() {
        const id = uploadId ?? (yield* send("put", key, (abortSignal) =>
          client.send(new sdk.CreateMultipartUploadCommand({ Bucket: bucket, Key: objectName(key) }), { abortSignal })
        ).pipe(Effect.map((response) => {
          uploadId = response.UploadId
          return uploadId ?? ""
        })))
        const bytes = takePending()
        const partNumber = parts.length + 1
        const response = yield* send("put", key, (abortSignal) =>
          client.send(
            new sdk.UploadPartCommand({
              Bucket: bucket,
              Key: objectName(key),
              UploadId: id,
              PartNumber: partNumber,
              Body: bytes,
              ContentLength: bytes.byteLength
            }),
            { abortSignal }
          ))
        parts.push({ PartNumber: partNumber, ETag: response.ETag ?? "" })
      })

      const upload = Effect.gen(function*() {
        yield* Stream.runForEach(body, (chunk) => {
          pending.push(chunk)
          pendingBytes += chunk.byteLength
          size += chunk.byteLength
          return pendingBytes >= partSize ? uploadPart : Effect.void
        })
        if (uploadId === undefined) return yield* putWhole(key, takePending())
        if (pendingBytes > 0) yield* uploadPart
        const id = uploadId
        return yield* send("put", key, (abortSignal) =>
          client.send(
            new sdk.CompleteMultipartUploadCommand({
              Bucket: bucket,
              Key: objectName(key),
              UploadId: id,
              MultipartUpload: { Parts: parts },
              IfNoneMatch: "*"
            }),
            { abortSignal }
          ).then(() => true, (error: unknown) => {
            if (isConditionalFailure(error)) return false
            throw error
          }))
      })

      const created = yield* upload.pipe(
        // Abort an unfinished (or refused) multipart upload so its parts are not kept and billed.
        Effect.onExit((exit) => {
          const id = uploadId
          if (id === undefined || (Exit.isSuccess(exit) && exit.value)) return Effect.void
          return Effect.promise(() =>
            client.send(new sdk.AbortMultipartUploadCommand({ Bucket: bucket, Key: objectName(key), UploadId: id }))
              .catch(() => undefined)
          )
        })
      )
      if (created) return { size, created }
      const stored = yield* head("put", key)
      return { size: stored ?? size, created: false }
    }).pipe(Effect.withSpan("ObjectStoreS3.put"))

  const isNotFound = (cause: unknown) => statusOf(cause) === 404

  const getRange = Effect.fn("ObjectStoreS3.getRange")(function*(rawKey: ObjectKey, offset: number, length: number) {
    return yield* readRange(rawKey, length, async (key) => {
      if (length === 0) return new Uint8Array(0)
      const response = await client.send(new sdk.GetObjectCommand({ Bucket: bucket, Key: objectName(key), Range: `bytes=${offset}-${offset + length - 1}` }))
      return response.Body === undefined ? new Uint8Array(0) : await response.Body.transformToByteArray()
    }, isNotFound)
  })

  const get = (rawKey: ObjectKey): Stream.Stream<Uint8Array, ObjectStoreError | ObjectNotFound> =>
    streamObject(rawKey, {
      // Ending the stream early aborts the download rather than reading the rest.
      acquire: async () => new AbortController(),
      release: (controller) => controller.abort(),
      body: (controller, key) =>
        client.send(new sdk.GetObjectCommand({ Bucket: bucket, Key: objectName(key) }), { abortSignal: controller.signal })
          .then((response) => response.Body as AsyncIterable<Uint8Array> | undefined),
      isNotFound
    })

  const has = Effect.fn("ObjectStoreS3.has")(function*(rawKey: ObjectKey) {
    const key = yield* validateKey("has", rawKey)
    return (yield* head("has", key)) !== undefined
  })

  const size = Effect.fn("ObjectStoreS3.size")(function*(rawKey: ObjectKey) {
    const key = yield* validateKey("size", rawKey)
    const bytes = yield* head("size", key)
    if (bytes === undefined) return yield* new ObjectNotFound({ namespace: key.namespace, hash: key.hash })
    return bytes
  })

  const remove = Effect.fn("ObjectStoreS3.delete")(function*(rawKey: ObjectKey) {
    const key = yield* validateKey("delete", rawKey)
    // S3 answers 204 for a missing key too.
    yield* send("delete", key, (abortSignal) =>
      client.send(new sdk.DeleteObjectCommand({ Bucket: bucket, Key: objectName(key) }), { abortSignal }))
  })

  /** Every page of a listing (at most 1,000 keys or prefixes a page). */
  const listAll = (operation: Operation, namespace: string, input: { Prefix?: string; Delimiter?: string }) =>
    Effect.tryPromise({
      try: async () => {
        const pages: Array<{ keys: Array<string>; prefixes: Array<string> }> = []
        let token: string | undefined
        do {
          const page = await client.send(new sdk.ListObjectsV2Command({ Bucket: bucket, ...input, ...(token === undefined ? {} : { ContinuationToken: token }) }))
          pages.push({
            keys: (page.Contents ?? []).flatMap((o) => o.Key === undefined ? [] : [o.Key]),
            prefixes: (page.CommonPrefixes ?? []).flatMap((p) => p.Prefix === undefined ? [] : [p.Prefix])
          })
          token = page.IsTruncated === true ? page.NextContinuationToken : undefined
        } while (token !== undefined)
        return { keys: pages.flatMap((p) => p.keys), prefixes: pages.flatMap((p) => p.prefixes) }
      },
      catch: (cause) => namespaceError(operation, namespace, cause)
    })

  const namespaces = Effect.map(listAll("list", "", { Delimiter: "/" }), ({ prefixes }) => prefixes.map((p) => p.slice(0, -1)))

  const deleteNamespace = Effect.fn("ObjectStoreS3.deleteNamespace")(function*(rawNamespace: string) {
    const namespace = yield* validateNamespace(rawNamespace)
    const { keys } = yield* listAll("delete", namespace, { Prefix: `${namespace}/` })
    // One DeleteObject per key: every S3 server has it (DeleteObjects needs Content-MD5 on some).
    yield* Effect.forEach(keys, (key) =>
      Effect.tryPromise({
        try: () => client.send(new sdk.DeleteObjectCommand({ Bucket: bucket, Key: key })),
        catch: (cause) => namespaceError("delete", namespace, cause)
      }), { concurrency: 8, discard: true })
    return keys.length
  })

  return ObjectStore.of({ put, get, getRange, has, size, delete: remove, namespaces, deleteNamespace })
})

export const layer = (options: ObjectStoreS3Options): Layer.Layer<ObjectStore> => Layer.effect(ObjectStore, make(options))
