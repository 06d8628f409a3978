import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Names } from "@grove/core"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { type ApiKeyRecord, Identity } from "./Identity.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"

const toApi = (k: ApiKeyRecord) => ({
  id: k.id,
  name: k.name,
  scope: k.scope,
  ...(k.repo === undefined ? {} : { repo: k.repo }),
  prefix: k.prefix,
  created_at: k.createdAt.toISOString(),
  ...(k.lastUsedAt === undefined ? {} : { last_used_at: k.lastUsedAt.toISOString() }),
  ...(k.expiresAt === undefined ? {} : { expires_at: k.expiresAt.toISOString() })
})

const currentUser = Effect.gen(function*() {
  const caller = yield* CurrentCaller
  if (caller.principal.kind !== "user") {
    return yield* new ApiErrors.Forbidden({ error: "only users have personal API keys", code: "forbidden" })
  }
  return { caller, userId: caller.principal.userId }
})

export const ApiKeysHandlers = HttpApiBuilder.group(GroveApi, "apiKeys", Effect.fn(function*(handlers) {
  const identity = yield* Identity
  const authorizer = yield* Authorizer
  return handlers.handleAll({
    list: Effect.fn(function*({ query }) {
      const caller = yield* CurrentCaller
      yield* authorizer.account(caller, "read")
      const { userId } = yield* currentUser
      const page = yield* pageRequest(query, ["timestamp", "uuid"])
      const rows = yield* dbUnavailable(identity.listApiKeys(userId, page))
      return (yield* pageResponse(rows, page)).map(toApi)
    }),
    create: Effect.fn(function*({ payload }) {
      const caller = yield* CurrentCaller
      yield* authorizer.account(caller, "write")
      const { userId } = yield* currentUser
      let repoId: string | undefined
      if (payload.repo !== undefined) {
        const full = Names.parseFullName(payload.repo)
        if (full === undefined) {
          return yield* new ApiErrors.BadRequest({ error: "repo must have the form owner/name", code: "invalid_input" })
        }
        // The key's owner must be able to read the repository it is limited to; otherwise it does not exist for them.
        const repo = yield* dbUnavailable(authorizer.repository(caller, full.owner, full.name, "read"))
        repoId = repo.id
      }
      // Beyond the spec: the schema checked the timestamp's form; it must also lie in the future.
      const expiresAt = payload.expires_at === undefined ? undefined : new Date(payload.expires_at)
      if (expiresAt !== undefined && expiresAt.getTime() <= Date.now()) {
        return yield* new ApiErrors.BadRequest({ error: "expires_at must be in the future", code: "invalid_input" })
      }
      const created = yield* dbUnavailable(
        identity.createApiKey(userId, { name: payload.name, scope: payload.scope ?? "full", repoId, expiresAt })
      )
      return { ...toApi(created.record), key: created.token }
    }),
    revoke: Effect.fn(function*({ params }) {
      const caller = yield* CurrentCaller
      yield* authorizer.account(caller, "write")
      const { userId } = yield* currentUser
      yield* dbUnavailable(identity.revokeApiKey(userId, params.id)).pipe(
        Effect.catchTag("KeyNotFound", () => Effect.fail(new ApiErrors.NotFound({ error: "API key not found", code: "not_found" })))
      )
    })
  })
}))
