import { ApiErrors, GroveApi } from "@grove/api"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Identity } from "../access/Identity.ts"
import { dbUnavailable } from "../http/Failures.ts"

export const CliAuthHandlers = HttpApiBuilder.group(GroveApi, "cliAuth", Effect.fn(function*(handlers) {
  const identity = yield* Identity
  return handlers.handleAll({
    exchange: Effect.fn(function*({ payload }) {
      const session = yield* dbUnavailable(identity.exchangeCliCode(payload.code)).pipe(
        Effect.catchTag("CodeNotValid", () =>
          Effect.fail(new ApiErrors.NotFound({ error: "the code is unknown, used or expired; sign in again", code: "invalid_code" })))
      )
      return { token: session.token, username: session.username, expires_at: session.expiresAt!.toISOString() }
    })
  })
}))
