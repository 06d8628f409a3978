/**
 * `GET /orgs/{slug}/audit`: the organization's audit log for its owners and admins (an instance
 * admin counts as an owner). Anonymous callers get 401 (the log is never public), callers who
 * cannot see the organization 404, plain members 403. A read: a read-only key of an owner will do.
 */
import { ApiErrors, CurrentCaller, GroveApi, sinceInstant } from "@grove/api"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"
import { type AuditRecord, AuditLog, isEntryId } from "./AuditLog.ts"

const toApi = (entry: AuditRecord) => ({
  id: entry.id,
  actor: entry.actor,
  action: entry.action,
  target: entry.target,
  details: entry.details,
  created_at: entry.createdAt.toISOString()
})

const invalidCursor = () =>
  new ApiErrors.BadRequest({ error: "cursor is not one this list answered with; start again without it", code: "invalid_cursor" })

export const AuditHandlers = HttpApiBuilder.group(GroveApi, "audit", Effect.fn(function*(handlers) {
  const auditLog = yield* AuditLog
  const authorizer = yield* Authorizer
  return handlers.handleAll({
    list: Effect.fn(function*({ params, query }) {
      const caller = yield* CurrentCaller
      // Owners and admins (and keys with the `admin` scope): organization management. Hidden from others (404).
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "admin"))
      const page = yield* pageRequest(query, ["text"])
      if (page.after !== undefined && !isEntryId(page.after[0])) return yield* invalidCursor()
      const rows = yield* dbUnavailable(auditLog.list(org.id, { action: query.action, actor: query.actor, since: query.since === undefined ? undefined : sinceInstant(query.since) }, page))
      return { entries: (yield* pageResponse(rows, page)).map(toApi) }
    })
  })
}))
