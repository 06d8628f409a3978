/**
 * Organization endpoints (`/orgs/...`). Reads go to the database; changes are commands to the
 * Organization entity (key: the slug) through the gateway. Managing members and groups needs the
 * owner or admin role (a member gets 403, a non-member 404); setting a quota, an instance admin.
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { AccessCaches } from "../cache/AccessCaches.ts"
import type { GatewayFailure } from "../entities/Sending.ts"
import { actorOf, commandRequest } from "../http/CallerContext.ts"
import { dbUnavailable, gatewayApiError, isGatewayFailure } from "../http/Failures.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"
import { type OrganizationError, organizationApiError } from "./OrganizationErrors.ts"
import { OrganizationGateway } from "./OrganizationGateway.ts"
import { type Organization, Organizations, toApiOrganization } from "../access/Organizations.ts"

const toApi = (o: Organization & { readonly role?: "member" | "admin" | "owner" | undefined }) => toApiOrganization(o, o.role)

const notRepoLimited = Effect.gen(function*() {
  const caller = yield* CurrentCaller
  if (caller.limits.kind === "personal" && caller.limits.repoId !== undefined) {
    return yield* new ApiErrors.Forbidden({ error: "this key is limited to one repository", code: "forbidden" })
  }
  return caller
})

const commandFailure = (error: OrganizationError | GatewayFailure) =>
  Effect.fail(isGatewayFailure(error) ? gatewayApiError(error) : organizationApiError(error))

export const OrgsHandlers = HttpApiBuilder.group(GroveApi, "orgs", Effect.fn(function*(handlers) {
  const organizations = yield* Organizations
  const authorizer = yield* Authorizer
  const gateway = yield* OrganizationGateway
  const caches = yield* AccessCaches
  /** A change through this node is seen by this node's next request at once (other nodes follow the events topic). */
  const forget = Effect.sync(() => caches.invalidateAll())
  /** The organization, for a caller who may manage it; and the command's actor fields. */
  const managed = Effect.fnUntraced(function*(slug: string) {
    const caller = yield* CurrentCaller
    const org = yield* dbUnavailable(authorizer.organization(caller, slug, "admin"))
    return { org, actor: yield* actorOf(caller), request: yield* commandRequest }
  })
  return handlers.handleAll({
    list: Effect.fn(function*({ query }) {
      const caller = yield* notRepoLimited
      yield* authorizer.account(caller, "read")
      if (caller.principal.kind !== "user") return { organizations: [] }
      const page = yield* pageRequest(query, ["text", "uuid"])
      const rows = yield* dbUnavailable(organizations.listForUser(caller.principal.userId, page))
      return { organizations: (yield* pageResponse(rows, page)).map(toApi) }
    }),
    create: Effect.fn(function*({ payload }) {
      const caller = yield* notRepoLimited
      yield* authorizer.account(caller, "write")
      if (caller.principal.kind !== "user") {
        return yield* new ApiErrors.Forbidden({ error: "only users can create organizations", code: "forbidden" })
      }
      return yield* gateway.create(payload.slug, {
        name: payload.name,
        description: payload.description ?? null,
        ...(yield* actorOf(caller))
      }, yield* commandRequest).pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    get: Effect.fn(function*({ params }) {
      const caller = yield* CurrentCaller
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "read"))
      return toApi({ ...org, role: org.callerRole })
    }),
    update: Effect.fn(function*({ params, payload }) {
      const { org, actor, request } = yield* managed(params.slug)
      return yield* gateway.update(org.slug, {
        ...(payload.name === undefined ? {} : { name: payload.name }),
        ...(payload.description === undefined ? {} : { description: payload.description }),
        ...actor
      }, request).pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    remove: Effect.fn(function*({ params }) {
      const caller = yield* CurrentCaller
      // Deleting an organization is its owners' call.
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "admin"))
      if (!(caller.principal.kind === "user" && caller.principal.siteAdmin) && org.callerRole !== "owner") {
        return yield* new ApiErrors.Forbidden({ error: "only an owner may delete the organization", code: "owner_required" })
      }
      yield* gateway.remove(org.slug, yield* actorOf(caller), yield* commandRequest).pipe(
        Effect.ensuring(forget),
        Effect.catch(commandFailure)
      )
    }),
    members: Effect.fn(function*({ params, query }) {
      const caller = yield* CurrentCaller
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "read"))
      const page = yield* pageRequest(query, ["text"])
      return { members: yield* pageResponse(yield* dbUnavailable(organizations.listMembers(org.id, page)), page) }
    }),
    addMember: Effect.fn(function*({ params, payload }) {
      const { org, actor, request } = yield* managed(params.slug)
      return yield* gateway.addMember(org.slug, { username: payload.username, role: payload.role ?? "member", ...actor }, request)
        .pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    setRole: Effect.fn(function*({ params, payload }) {
      const { org, actor, request } = yield* managed(params.slug)
      return yield* gateway.setRole(org.slug, { username: params.username, role: payload.role, ...actor }, request)
        .pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    removeMember: Effect.fn(function*({ params }) {
      const { org, actor, request } = yield* managed(params.slug)
      yield* gateway.removeMember(org.slug, { username: params.username, ...actor }, request)
        .pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    groups: Effect.fn(function*({ params, query }) {
      const caller = yield* CurrentCaller
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "read"))
      const page = yield* pageRequest(query, ["text"])
      return { groups: yield* pageResponse(yield* dbUnavailable(organizations.listGroups(org.id, page)), page) }
    }),
    createGroup: Effect.fn(function*({ params, payload }) {
      const { org, actor, request } = yield* managed(params.slug)
      return yield* gateway.createGroup(org.slug, { group: payload.slug, description: payload.description ?? null, ...actor }, request)
        .pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    deleteGroup: Effect.fn(function*({ params }) {
      const { org, actor, request } = yield* managed(params.slug)
      yield* gateway.deleteGroup(org.slug, { group: params.group, ...actor }, request)
        .pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    addGroupMember: Effect.fn(function*({ params, payload }) {
      const { org, actor, request } = yield* managed(params.slug)
      return yield* gateway.addGroupMember(org.slug, { group: params.group, username: payload.username, ...actor }, request)
        .pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    removeGroupMember: Effect.fn(function*({ params }) {
      const { org, actor, request } = yield* managed(params.slug)
      yield* gateway.removeGroupMember(org.slug, { group: params.group, username: params.username, ...actor }, request)
        .pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    setQuota: Effect.fn(function*({ params, payload }) {
      const caller = yield* CurrentCaller
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "admin"))
      if (!(caller.principal.kind === "user" && caller.principal.siteAdmin)) {
        return yield* new ApiErrors.Forbidden({ error: "only an instance admin may set an organization's quota", code: "forbidden" })
      }
      return yield* gateway.setQuota(org.slug, { quotaBytes: payload.quota_bytes, ...(yield* actorOf(caller)) }, yield* commandRequest)
        .pipe(Effect.catch(commandFailure))
    })
  })
}))
