/**
 * Joins what the database knows (the repository, the caller's role) with the
 * pure decision in `@grove/core`, and turns a denial into the API's error.
 */
import { ApiErrors, type Caller, CurrentCaller } from "@grove/api"
import { Access } from "@grove/core"
import { Context, Effect, Layer, Option } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { type Organization, Organizations } from "./Organizations.ts"
import { Repositories } from "./Repositories.ts"
import type { RepositoryRecord } from "./RepositoryRecord.ts"

export type Denied = ApiErrors.Unauthorized | ApiErrors.Forbidden | ApiErrors.NotFound

export const denial = (decision: Access.Decision, what: string): Effect.Effect<void, Denied> => {
  if (decision._tag === "Allow") return Effect.void
  switch (decision.status) {
    case 401:
      return Effect.fail(new ApiErrors.Unauthorized({ error: "sign in required: send Authorization: Bearer <token>", code: "unauthenticated" }))
    case 404:
      return Effect.fail(new ApiErrors.NotFound({ error: `${what} not found`, code: "not_found" }))
    case 403:
      return Effect.fail(
        new ApiErrors.Forbidden({
          error: decision.reason,
          code: decision.missingScope === undefined ? "forbidden" : "missing_scope",
          ...(decision.missingScope === undefined ? {} : { scope: decision.missingScope })
        })
      )
  }
}

/** Runs on every request: untraced, because a traced function captures a stack trace per call. */
// Cached records are shared and immutable: one answer object per (record, role), so what derives
// from it (a repository's API form, access/RepositoryRecord.ts) is built once, not per request.
const withRoles = new WeakMap<object, Map<Access.Role | undefined, object>>()
const withRole = <A extends object>(record: A, callerRole: Access.Role | undefined): A & { readonly callerRole: Access.Role | undefined } => {
  let byRole = withRoles.get(record)
  if (byRole === undefined) withRoles.set(record, byRole = new Map())
  let answer = byRole.get(callerRole)
  if (answer === undefined) byRole.set(callerRole, answer = { ...record, callerRole })
  return answer as A & { readonly callerRole: Access.Role | undefined }
}

export class Authorizer extends Context.Service<Authorizer, {
  readonly repository: (
    caller: Caller,
    owner: string,
    name: string,
    action: Access.Action
  ) => Effect.Effect<RepositoryRecord & { readonly callerRole: Access.Role | undefined }, Denied | SqlError>
  readonly organization: (
    caller: Caller,
    slug: string,
    action: Access.Action
  ) => Effect.Effect<Organization & { readonly callerRole: Access.Role | undefined }, Denied | SqlError>
  readonly account: (caller: Caller, action: Access.Action) => Effect.Effect<void, Denied>
  /**
   * `repository`'s answer when everything it needs is cached and access is allowed; undefined otherwise
   * (a miss, or any denial: the caller then asks `repository`, which reads what is missing and answers the error).
   */
  readonly cachedRepository: (
    caller: Caller,
    owner: string,
    name: string,
    action: Access.Action
  ) => (RepositoryRecord & { readonly callerRole: Access.Role | undefined }) | undefined
  /** `organization`'s answer when all it needs is cached and access is allowed; undefined otherwise. */
  readonly cachedOrganization: (
    caller: Caller,
    slug: string,
    action: Access.Action
  ) => (Organization & { readonly callerRole: Access.Role | undefined }) | undefined
}>()("grove/server/access/Authorizer") {
  static readonly layer = Layer.effect(Authorizer, Effect.gen(function*() {
    const repositories = yield* Repositories
    const organizations = yield* Organizations
    /** Whose role in an organization counts for a caller: a user's membership; a service-account key's creator, in its own organization only. */
    const roleHolder = (caller: Caller, orgId: string) => {
      const { principal, limits } = caller
      if (principal.kind === "user") return { member: principal.userId } as const
      if (principal.kind === "service_account" && principal.orgId === orgId && limits.kind === "service" && limits.creatorId !== undefined) {
        return { creator: limits.creatorId } as const
      }
      return undefined
    }
    /** The caller's role in an organization. */
    const roleFor = (caller: Caller, orgId: string): Effect.Effect<Access.Role | undefined, SqlError> => {
      const holder = roleHolder(caller, orgId)
      if (holder === undefined) return Effect.succeed(undefined)
      return "member" in holder ? organizations.roleOf(orgId, caller.principal) : organizations.creatorRole(orgId, holder.creator)
    }
    /** `roleFor` from the cache only: `{ value }`, or undefined when not cached. */
    const cachedRoleFor = (caller: Caller, orgId: string): { readonly value: Access.Role | undefined } | undefined => {
      const holder = roleHolder(caller, orgId)
      if (holder === undefined) return { value: undefined }
      return "member" in holder ? organizations.cachedRoleOf(orgId, holder.member) : organizations.cachedCreatorRole(orgId, holder.creator)
    }
    const decideRepository = (caller: Caller, repo: RepositoryRecord, callerRole: Access.Role | undefined, action: Access.Action) =>
      Access.decide(caller.principal, caller.limits, {
        kind: "repository",
        repoId: repo.id,
        orgId: repo.orgId,
        isPublic: repo.isPublic,
        callerRole
      }, action)
    const decideOrganization = (caller: Caller, org: Organization, callerRole: Access.Role | undefined, action: Access.Action) =>
      Access.decide(caller.principal, caller.limits, { kind: "organization", orgId: org.id, callerRole }, action)
    return Authorizer.of({
      repository: Effect.fnUntraced(function*(caller, owner, name, action) {
        const found = yield* repositories.findByFullName(owner, name)
        if (Option.isNone(found)) {
          // Missing answers like hidden: a caller who could not see it gets the same 404.
          return yield* new ApiErrors.NotFound({ error: `repository ${owner}/${name} not found`, code: "not_found" })
        }
        const repo = found.value
        const callerRole = yield* roleFor(caller, repo.orgId)
        yield* denial(decideRepository(caller, repo, callerRole, action), `repository ${owner}/${name}`)
        return withRole(repo, callerRole)
      }),
      cachedRepository: (caller, owner, name, action) => {
        const repo = repositories.cachedByFullName(owner, name)
        if (repo === undefined) return undefined
        const role = cachedRoleFor(caller, repo.orgId)
        if (role === undefined || decideRepository(caller, repo, role.value, action)._tag !== "Allow") return undefined
        return withRole(repo, role.value)
      },
      organization: Effect.fnUntraced(function*(caller, slug, action) {
        const found = yield* organizations.findBySlug(slug)
        if (Option.isNone(found)) {
          return yield* new ApiErrors.NotFound({ error: `organization ${slug} not found`, code: "not_found" })
        }
        const callerRole = yield* roleFor(caller, found.value.id)
        yield* denial(decideOrganization(caller, found.value, callerRole, action), `organization ${slug}`)
        return withRole(found.value, callerRole)
      }),
      cachedOrganization: (caller, slug, action) => {
        const org = organizations.cachedBySlug(slug)
        if (org === undefined) return undefined
        const role = cachedRoleFor(caller, org.id)
        if (role === undefined || decideOrganization(caller, org, role.value, action)._tag !== "Allow") return undefined
        return withRole(org, role.value)
      },
      account: (caller, action) => denial(Access.decide(caller.principal, caller.limits, { kind: "account" }, action), "account")
    })
  }))
}

/** The route's repository for the current caller, authorized for `action` (503 when the database is down). */
export const callerRepository = (params: { readonly owner: string; readonly name: string }, action: Access.Action) =>
  Effect.gen(function*() {
    const authorizer = yield* Authorizer
    const caller = yield* CurrentCaller
    return yield* authorizer.repository(caller, params.owner, params.name, action).pipe(
      Effect.catchTag("SqlError", (error) =>
        Effect.logWarning("database unavailable", error).pipe(
          Effect.andThen(Effect.fail(new ApiErrors.ServiceUnavailable({ error: "the database is unavailable; try again", code: "unavailable", retryable: true })))
        ))
    )
  })
