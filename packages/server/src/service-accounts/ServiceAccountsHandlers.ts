/**
 * Service-account endpoints (`/orgs/{slug}/service-accounts/...`). Listing needs read access to
 * the organization; every change needs the owner or admin role (a member gets 403, a non-member
 * 404) and is a command to the Organization entity. A key's scopes never exceed what its creator
 * may hand out (`release` only from an owner) nor, for a key made by a key, that key's scopes.
 */
import { ApiErrors, type Caller, CurrentCaller, GroveApi } from "@grove/api"
import { Access } from "@grove/core"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { randomUUID } from "node:crypto"
import { Authorizer } from "../access/Authorizer.ts"
import { AccessCaches } from "../cache/AccessCaches.ts"
import type { GatewayFailure } from "../entities/Sending.ts"
import { actorOf, commandRequest } from "../http/CallerContext.ts"
import { dbUnavailable, gatewayApiError, isGatewayFailure } from "../http/Failures.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"
import * as Secrets from "../access/Secrets.ts"
import { type ServiceAccountError, serviceAccountApiError } from "./ServiceAccountErrors.ts"
import { ServiceAccountGateway } from "./ServiceAccountGateway.ts"
import { ServiceAccounts } from "./ServiceAccounts.ts"

const commandFailure = (error: ServiceAccountError | GatewayFailure) =>
  Effect.fail(isGatewayFailure(error) ? gatewayApiError(error) : serviceAccountApiError(error))

/** What the caller may put in a key: by their role, and never beyond the scopes of the key they call with. */
const grantable = (caller: Caller, role: Access.Role | undefined): ReadonlyArray<Access.Scope> => {
  const byRole = Access.grantableScopes(caller.principal.kind === "user" && caller.principal.siteAdmin ? "owner" : role)
  return caller.limits.kind === "service" ? byRole.filter((scope) => caller.limits.kind === "service" && caller.limits.scopes.includes(scope)) : byRole
}

export const ServiceAccountsHandlers = HttpApiBuilder.group(GroveApi, "serviceAccounts", Effect.fn(function*(handlers) {
  const accounts = yield* ServiceAccounts
  const authorizer = yield* Authorizer
  const gateway = yield* ServiceAccountGateway
  const caches = yield* AccessCaches
  const forget = Effect.sync(() => caches.invalidateAll())
  const managed = Effect.fnUntraced(function*(slug: string) {
    const caller = yield* CurrentCaller
    const org = yield* dbUnavailable(authorizer.organization(caller, slug, "admin"))
    return { caller, org, actor: yield* actorOf(caller), request: yield* commandRequest }
  })
  const accountId = Effect.fnUntraced(function*(orgId: string, name: string) {
    const id = yield* dbUnavailable(accounts.find(orgId, name))
    if (id === undefined) return yield* new ApiErrors.NotFound({ error: `service account ${name} not found`, code: "not_found" })
    return id
  })
  return handlers.handleAll({
    list: Effect.fn(function*({ params, query }) {
      const caller = yield* CurrentCaller
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "read"))
      const page = yield* pageRequest(query, ["text"])
      return { service_accounts: yield* pageResponse(yield* dbUnavailable(accounts.list(org.id, org.slug, page)), page) }
    }),
    create: Effect.fn(function*({ params, payload }) {
      const { org, actor, request } = yield* managed(params.slug)
      return yield* gateway.create(org.slug, { name: payload.name, displayName: payload.display_name ?? null, ...actor }, request)
        .pipe(Effect.catch(commandFailure))
    }),
    update: Effect.fn(function*({ params, payload }) {
      const { org, actor, request } = yield* managed(params.slug)
      return yield* gateway.update(org.slug, { name: params.name, disabled: payload.disabled, ...actor }, request)
        .pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    remove: Effect.fn(function*({ params }) {
      const { org, actor, request } = yield* managed(params.slug)
      yield* gateway.remove(org.slug, { name: params.name, ...actor }, request).pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    }),
    keys: Effect.fn(function*({ params, query }) {
      const caller = yield* CurrentCaller
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "admin"))
      const id = yield* accountId(org.id, params.name)
      const page = yield* pageRequest(query, ["timestamp", "uuid"])
      return { keys: yield* pageResponse(yield* dbUnavailable(accounts.keys(id, page)), page) }
    }),
    createKey: Effect.fn(function*({ params, payload }) {
      const { caller, org, actor, request } = yield* managed(params.slug)
      const scopes = Access.parseScopes(payload.scopes)
      if (scopes === undefined) {
        return yield* new ApiErrors.BadRequest({
          error: `scopes must be a comma-separated list of ${Access.SCOPES.join(", ")} (at least one)`,
          code: "invalid_input"
        })
      }
      const allowed = grantable(caller, org.callerRole)
      const beyond = scopes.find((scope) => !allowed.includes(scope))
      if (beyond !== undefined) {
        return yield* new ApiErrors.Forbidden({
          error: `you may not grant the '${beyond}' scope: a key never does more than its creator can`,
          code: "forbidden",
          scope: beyond
        })
      }
      yield* accountId(org.id, params.name)
      const token = Secrets.newToken()
      const created = yield* gateway.createKey(org.slug, {
        account: params.name,
        keyId: randomUUID(),
        name: payload.name,
        scopes: scopes.join(","),
        secretHash: Secrets.hashToken(token),
        prefix: Secrets.tokenPrefix(token),
        creatorId: actor.actorUserId,
        ...actor
      }, request).pipe(Effect.catch(commandFailure))
      if (created.prefix !== Secrets.tokenPrefix(token)) {
        return yield* new ApiErrors.Conflict({
          error: "this key was created by the first request with this Idempotency-Key; its secret was shown once",
          code: "already_created"
        })
      }
      return { ...created, key: token }
    }),
    revokeKey: Effect.fn(function*({ params }) {
      const { org, actor, request } = yield* managed(params.slug)
      yield* gateway.revokeKey(org.slug, { account: params.name, keyId: params.key_id, ...actor }, request)
        .pipe(Effect.ensuring(forget), Effect.catch(commandFailure))
    })
  })
}))
