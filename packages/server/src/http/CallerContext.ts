/** What a write needs to know about its caller: the command id an Idempotency-Key makes, and the name audit rows and events carry. */
import { ApiErrors, CurrentCaller } from "@grove/api"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"

/** `Idempotency-Key` makes a retried write replay its first answer instead of acting twice. */
export const commandId = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const caller = yield* CurrentCaller
  const key = request.headers["idempotency-key"]
  if (key === undefined) return undefined
  if (!/^[\x21-\x7e]{1,200}$/.test(key)) {
    return yield* new ApiErrors.BadRequest({ error: "Idempotency-Key must be 1-200 printable ASCII characters", code: "invalid_input" })
  }
  const who = caller.principal.kind === "user"
    ? caller.principal.userId
    : caller.principal.kind === "service_account"
    ? caller.principal.accountId
    : "anonymous"
  return `idem:${who}:${key}`
})

export const actorName = Effect.gen(function*() {
  const { principal } = yield* CurrentCaller
  return principal.kind === "user"
    ? principal.username
    : principal.kind === "service_account"
    ? `service:${principal.name}`
    : "anonymous"
})
