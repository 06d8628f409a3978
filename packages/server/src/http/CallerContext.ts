/**
 * What a write needs to know about its caller: the write request an
 * Idempotency-Key makes (command id, owner, request fingerprint), and the name
 * audit rows and events carry.
 */
import { ApiErrors, type Caller, CurrentCaller } from "@grove/api"
import { EntityRuntime } from "@grove/bus"
import { Effect, Option } from "effect"
import { HttpServerRequest } from "effect/http"
import { createHash } from "node:crypto"
import { IdempotencyKeyReused, type WriteRequest } from "../entities/Sending.ts"
import { dbUnavailable, gatewayApiError } from "./Failures.ts"

/** Who a caller is, as operations record it: only they may read an operation or reuse its key. */
export const principalKey = (caller: Caller): string => {
  const { principal } = caller
  return principal.kind === "user"
    ? `user:${principal.userId}`
    : principal.kind === "service_account"
    ? `service:${principal.accountId}`
    : "anonymous"
}

/** The request an idempotency key is bound to: method, path with query, and a hash of the body. */
const fingerprintOf = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  // JSON bodies were read (and kept) when the payload was decoded; this reads the kept bytes.
  const body = yield* request.arrayBuffer.pipe(Effect.orElseSucceed(() => new ArrayBuffer(0)))
  return createHash("sha256").update(`${request.method} ${request.url}\n`).update(new Uint8Array(body)).digest("hex")
})

/**
 * The write request of this HTTP request. With an `Idempotency-Key`, a retried
 * write replays its first answer instead of acting twice, and the same key
 * with another request (another method, path, query or body), or from another
 * caller, answers 409 `idempotency_key_reused` before any work is done.
 * `previous` is what became of the first request with this key, if any.
 */
export const writeRequest = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const caller = yield* CurrentCaller
  const owner = principalKey(caller)
  const key = request.headers["idempotency-key"]
  if (key === undefined) return { request: { owner } satisfies WriteRequest, previous: Option.none() }
  if (!/^[\x21-\x7e]{1,200}$/.test(key)) {
    return yield* new ApiErrors.BadRequest({ error: "Idempotency-Key must be 1-200 printable ASCII characters", code: "invalid_input" })
  }
  const commandId = `idem:${owner}:${key}`
  const fingerprint = yield* fingerprintOf
  const runtime = yield* EntityRuntime.EntityRuntime
  const previous = yield* dbUnavailable(runtime.operation(commandId))
  if (Option.isSome(previous) && (previous.value.owner !== owner || previous.value.fingerprint !== fingerprint)) {
    return yield* gatewayApiError(new IdempotencyKeyReused({ operationId: commandId }))
  }
  return { request: { commandId, owner, fingerprint } satisfies WriteRequest, previous }
})

/** The write request alone, for writes that need no look at an earlier attempt. */
export const commandRequest = Effect.map(writeRequest, (write) => write.request)

export const actorName = Effect.gen(function*() {
  const { principal } = yield* CurrentCaller
  return principal.kind === "user"
    ? principal.username
    : principal.kind === "service_account"
    ? `service:${principal.name}`
    : "anonymous"
})

/** What every command carries about its sender. */
export const actorOf = Effect.fnUntraced(function*(caller: Caller) {
  const { principal, limits } = caller
  return {
    actor: yield* actorName,
    // A service-account key acts with its creator's standing (checked again by commands that need an owner).
    actorUserId: principal.kind === "user" ? principal.userId : limits.kind === "service" ? limits.creatorId ?? null : null,
    actorSiteAdmin: principal.kind === "user" && principal.siteAdmin
  }
})
