import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Access } from "@grove/core"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { ServerConfig } from "../Config.ts"
import { Operations } from "../entities/Operations.ts"
import { Repositories } from "../repos/Repositories.ts"
import { SERVER_VERSION } from "../Version.ts"
import { dbUnavailable } from "./Failures.ts"

export const SystemHandlers = HttpApiBuilder.group(GroveApi, "system", Effect.fn(function*(handlers) {
  const config = yield* ServerConfig
  const authorizer = yield* Authorizer
  const operations = yield* Operations
  const repositories = yield* Repositories
  return handlers.handleAll({
    version: () => Effect.succeed({ version: SERVER_VERSION, mode: config.mode, node_id: config.nodeId }),
    whoami: Effect.fnUntraced(function*() {
      const caller = yield* CurrentCaller
      yield* authorizer.account(caller, "read")
      const { principal, limits } = caller
      if (principal.kind !== "user") {
        return yield* new ApiErrors.Unauthorized({ error: "sign in required", code: "unauthenticated" })
      }
      const repoId = limits.kind === "personal" ? limits.repoId : undefined
      const repo = repoId === undefined ? undefined : yield* dbUnavailable(repositories.findById(repoId))
      return {
        kind: "user" as const,
        name: principal.username,
        username: principal.username,
        is_admin: principal.siteAdmin,
        token: {
          kind: limits.kind === "session" ? "session" as const : limits.kind === "personal" ? "personal" as const : "service" as const,
          scopes: [...Access.tokenScopes(limits)],
          ...(repo !== undefined && repo._tag === "Some" ? { repo: `${repo.value.owner}/${repo.value.name}` } : {}),
          ...(caller.expiresAt === undefined ? {} : { expires_at: caller.expiresAt.toISOString() })
        }
      }
    }),
    operation: Effect.fn(function*({ params }) {
      const caller = yield* CurrentCaller
      yield* authorizer.account(caller, "read")
      return yield* operations.get(caller, params.id)
    })
  })
}))
