import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { type Organization, Organizations } from "./Organizations.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"

const toApi = (o: Organization & { readonly role?: "member" | "admin" | "owner" | undefined }) => ({
  slug: o.slug,
  name: o.name,
  ...(o.description === null ? {} : { description: o.description }),
  personal: o.personal,
  ...(o.role === undefined ? {} : { role: o.role }),
  created_at: o.createdAt.toISOString()
})

const notRepoLimited = Effect.gen(function*() {
  const caller = yield* CurrentCaller
  if (caller.limits.kind === "personal" && caller.limits.repoId !== undefined) {
    return yield* new ApiErrors.Forbidden({ error: "this key is limited to one repository", code: "forbidden" })
  }
  return caller
})

export const OrgsHandlers = HttpApiBuilder.group(GroveApi, "orgs", Effect.fn(function*(handlers) {
  const organizations = yield* Organizations
  const authorizer = yield* Authorizer
  return handlers.handleAll({
    list: Effect.fn(function*({ query }) {
      const caller = yield* notRepoLimited
      yield* authorizer.account(caller, "read")
      if (caller.principal.kind !== "user") return []
      const page = yield* pageRequest(query, ["text", "uuid"])
      const rows = yield* dbUnavailable(organizations.listForUser(caller.principal.userId, page))
      return (yield* pageResponse(rows, page)).map(toApi)
    }),
    create: Effect.fn(function*({ payload }) {
      const caller = yield* notRepoLimited
      yield* authorizer.account(caller, "write")
      if (caller.principal.kind !== "user") {
        return yield* new ApiErrors.Forbidden({ error: "only users can create organizations", code: "forbidden" })
      }
      const created = yield* dbUnavailable(
        organizations.create(caller.principal.userId, caller.principal.username, payload)
      ).pipe(
        Effect.catchTag("NameTaken", () =>
          Effect.fail(new ApiErrors.Conflict({ error: `the name ${payload.slug} is already taken`, code: "name_taken" })))
      )
      return toApi(created)
    }),
    get: Effect.fn(function*({ params }) {
      const caller = yield* CurrentCaller
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "read"))
      return toApi({ ...org, role: org.callerRole })
    })
  })
}))
