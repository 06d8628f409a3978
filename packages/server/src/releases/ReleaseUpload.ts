/**
 * A release binary's way in: the request body is streamed to a temporary file while its SHA-256
 * (the object's name) and BLAKE2b-512 (what minisign signs) are computed, bounded by the configured
 * size; then it is stored in the object store under that SHA-256. The temporary file always goes.
 */
import { ApiErrors } from "@grove/api"
import * as Minisign from "@grove/core/release/Minisign"
import { ObjectStore } from "@grove/storage"
import { Effect, Stream } from "effect"
import { HttpServerRequest } from "effect/http"
import { createHash } from "node:crypto"
import { createReadStream } from "node:fs"
import { mkdtemp, open, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { RELEASE_NAMESPACE } from "./Releases.ts"

export interface Received {
  readonly sha256: string
  readonly prehash: Uint8Array
  readonly size: number
}

const tooLarge = (maxBytes: number) =>
  new ApiErrors.PayloadTooLarge({ error: `a release binary must be at most ${maxBytes} bytes`, code: "payload_too_large" })
const unreadable = new ApiErrors.BadRequest({ error: "the request body could not be read", code: "invalid_request" })

/** Receives the body and stores it; answers its hashes and size. */
export const receiveBinary = Effect.fn("ReleaseUpload.receiveBinary")(function*(maxBytes: number) {
  const request = yield* HttpServerRequest.HttpServerRequest
  const declared = Number(request.headers["content-length"] ?? NaN)
  if (Number.isFinite(declared) && declared > maxBytes) return yield* tooLarge(maxBytes)
  const dir = yield* Effect.acquireRelease(
    Effect.promise(() => mkdtemp(path.join(tmpdir(), "grove-release-"))),
    (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
  )
  const file = path.join(dir, "binary")
  const handle = yield* Effect.acquireRelease(
    Effect.promise(() => open(file, "wx", 0o600)),
    (handle) => Effect.promise(() => handle.close().catch(() => undefined))
  )
  const sha256 = createHash("sha256")
  const prehash = Minisign.prehasher()
  let size = 0
  yield* Stream.runForEach(request.stream, (part) => {
    size += part.length
    if (size > maxBytes) return Effect.fail(tooLarge(maxBytes))
    sha256.update(part)
    prehash.update(part)
    return Effect.promise(() => handle.write(part))
  }).pipe(Effect.mapError((error) => error instanceof ApiErrors.PayloadTooLarge ? error : unreadable))
  if (size === 0) return yield* new ApiErrors.BadRequest({ error: "the release binary is empty", code: "invalid_input" })
  const digest = sha256.digest("hex")
  const store = yield* ObjectStore.ObjectStore
  yield* store.put(
    { namespace: RELEASE_NAMESPACE, hash: digest },
    Stream.fromAsyncIterable(createReadStream(file) as AsyncIterable<Uint8Array>, (cause) => cause)
  ).pipe(Effect.catch((error) =>
    Effect.logWarning("release binary not stored", error).pipe(
      Effect.andThen(Effect.fail(new ApiErrors.ServiceUnavailable({ error: "the object store is unavailable; try again", code: "unavailable", retryable: true })))
    )
  ))
  return { sha256: digest, prehash: new Uint8Array(prehash.digest()), size } satisfies Received
}, Effect.scoped)
