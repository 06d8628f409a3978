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
import { dbUnavailable } from "../http/Failures.ts"

/** A partition retrying this long (the database or the bus is away) makes the node unready. */
const STUCK_AFTER_MS = 5_000

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
      const report = runtime.health()
      const { stalled, dead, group, unserved } = report
      if (!report.bus.reachable) {
        return yield* notReady(`the message bus cannot be reached (${report.bus.error ?? "no answer"})`, {
          bus: false,
          unserved: group?.assigned ?? []
        })
      }
      if (report.host && (group === undefined || !group.joined)) {
        return yield* notReady(`not a member of the command partitions' group (${group?.error ?? "not joined"}); rejoining`, {
          bus: true,
          unserved: []
        })
      }
      // A hosting node the group gives nothing is mid-rebalance (32 partitions, fewer nodes): it serves nothing yet.
      if (report.host && group !== undefined && group.assigned.length === 0) {
        return yield* notReady("this node owns no command partition right now (a rebalance is under way)", { bus: true, unserved: [] })
      }
      if (dead.length > 0) {
        return yield* notReady(`no worker for partitions ${dead.map((d) => d.partition).join(", ")}`, { bus: true, unserved })
      }
      if (unserved.length > 0) {
        return yield* notReady(`partitions ${unserved.join(", ")} are assigned here but not served yet`, { bus: true, unserved })
      }
      const now = Date.now()
      const stuck = stalled.filter((stall) => now - stall.since >= STUCK_AFTER_MS)
      if (stuck.length > 0) {
        return yield* notReady(`partitions ${stuck.map((s) => s.partition).join(", ")} are stuck retrying`, { bus: true, unserved: [] })
      }
      const partitions = report.claimed.map((claim) => claim.partition)
      return {
        status: "ok" as const,
        mode: config.mode,
        node_id: config.nodeId,
        stalled_partitions: stalled.map((s) => s.partition),
        // A client-only node (it hosts no partitions) is ready as a client: it sends writes, it serves none.
        role: report.host ? "host" as const : "client" as const,
        partitions
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
