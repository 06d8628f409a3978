import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Access } from "@grove/core"
import { EntityRuntime } from "@grove/bus"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { ServerConfig } from "../Config.ts"
import { Operations } from "../entities/Operations.ts"
import { Repositories } from "../access/Repositories.ts"
import { SERVER_VERSION } from "../Version.ts"
import { commandSide } from "../ops/Readiness.ts"
import { dbUnavailable } from "../http/Failures.ts"

export const SystemHandlers = HttpApiBuilder.group(GroveApi, "system", Effect.fn(function*(handlers) {
  const config = yield* ServerConfig
  const authorizer = yield* Authorizer
  const operations = yield* Operations
  const repositories = yield* Repositories
  const runtime = yield* EntityRuntime.EntityRuntime
  const sql = yield* SqlClient.SqlClient
  return handlers.handleAll({
    version: () => Effect.succeed({ version: SERVER_VERSION, mode: config.mode, node_id: config.nodeId }),
    health: Effect.fnUntraced(function*() {
      const notReady = (why: string, detail: { readonly unserved?: ReadonlyArray<number>; readonly bus?: boolean } = {}) =>
        new ApiErrors.ServiceUnavailable({
          error: `not ready: ${why}`,
          code: "not_ready",
          retryable: true,
          ...(detail.unserved === undefined ? {} : { unserved_partitions: [...detail.unserved] }),
          ...(detail.bus === undefined ? {} : { bus_reachable: detail.bus })
        })
      const database = yield* sql`SELECT 1`.pipe(Effect.timeout("2 seconds"), Effect.as(true), Effect.catchCause(() => Effect.succeed(false)))
      if (!database) return yield* notReady("the database does not answer")
      const side = commandSide(runtime.health())
      if (!side.ready) return yield* notReady(side.why, { bus: side.busReachable, unserved: side.unserved })
      return {
        status: "ok" as const,
        mode: config.mode,
        node_id: config.nodeId,
        stalled_partitions: [...side.stalled],
        role: side.role,
        partitions: [...side.partitions]
      }
    }),
    whoami: Effect.fnUntraced(function*() {
      const caller = yield* CurrentCaller
      const { principal, limits } = caller
      // Any key of a service account may ask who it is, whatever its scopes.
      if (principal.kind === "service_account") {
        return {
          kind: "service_account" as const,
          name: principal.name,
          username: `service:${principal.name}`,
          is_admin: false,
          organization: principal.orgSlug,
          token: { kind: "service" as const, scopes: [...Access.tokenScopes(limits)] }
        }
      }
      yield* authorizer.account(caller, "read")
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
