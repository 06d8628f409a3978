/**
 * `GET /{owner}/{name}/path-permissions`: the server's parse of `.oak/PERMISSIONS` on main, with a
 * warning for every principal that names no user or group of the repository's organization.
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Permissions } from "@grove/core"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { Authorizer } from "../access/Authorizer.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { PathPermissions } from "./PathPermissions.ts"

export const PathPermissionsHandlers = HttpApiBuilder.group(GroveApi, "pathPermissions", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const permissions = yield* PathPermissions
  const sql = yield* SqlClient.SqlClient
  /** The principals of `names` (`@user`, `@org/group`) that exist. */
  const known = (orgId: string, orgSlug: string, names: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const users = names.filter((n) => n.startsWith("@") && !n.includes("/")).map((n) => n.slice(1))
      const groups = names.filter((n) => n.startsWith(`@${orgSlug}/`)).map((n) => n.slice(orgSlug.length + 2))
      const found = new Set<string>()
      if (users.length > 0) {
        for (const row of yield* sql<{ username: string }>`SELECT username FROM users WHERE username IN ${sql.in(users)}`) {
          found.add(`@${row.username}`)
        }
      }
      if (groups.length > 0) {
        for (const row of yield* sql<{ slug: string }>`SELECT slug FROM org_groups WHERE org_id = ${orgId} AND slug IN ${sql.in(groups)}`) {
          found.add(`@${orgSlug}/${row.slug}`)
        }
      }
      return found
    })
  return handlers.handleAll({
    show: Effect.fn(function*({ params }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "read"))
      const unavailable = () =>
        new ApiErrors.ServiceUnavailable({ error: "path permissions could not be read; try again", code: "unavailable", retryable: true })
      const loaded = yield* permissions.load(repo).pipe(Effect.mapError(unavailable))
      if (loaded === undefined) {
        return { entries: [], principals: [], warnings: [], enforced: false, valid: true, lockdown: false, commit: null }
      }
      const exists = yield* known(repo.orgId, repo.owner, loaded.file.principals).pipe(Effect.mapError(unavailable))
      const file = Permissions.withUnknownPrincipals(loaded.file, (principal) => exists.has(principal))
      return {
        entries: file.entries.map((e) => ({ line: e.line, pattern: e.pattern, principals: [...e.principals] })),
        principals: [...file.principals],
        warnings: file.warnings.map((w) => ({ line: w.line, code: w.code, message: w.message })),
        enforced: true,
        valid: file.valid,
        lockdown: file.lockdown,
        commit: loaded.head
      }
    })
  })
}))
