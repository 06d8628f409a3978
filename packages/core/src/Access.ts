/**
 * The one authorization decision: principal + token limits + resource + action
 * -> allow | 401 | 403 (naming what is missing) | 404. Pure; the handlers look
 * up memberships and resources and call this.
 *
 * Hidden and missing are indistinguishable: whenever the caller may not see a
 * resource the answer is 404, before any scope or role is considered.
 */

export const SCOPES = ["read", "write", "merge", "admin", "release"] as const
export type Scope = (typeof SCOPES)[number]

export const ROLES = ["member", "admin", "owner"] as const
export type Role = (typeof ROLES)[number]

const roleRank: Record<Role, number> = { member: 1, admin: 2, owner: 3 }

export type Principal =
  | { readonly kind: "anonymous" }
  | { readonly kind: "user"; readonly userId: string; readonly username: string; readonly siteAdmin: boolean }
  | { readonly kind: "service_account"; readonly accountId: string; readonly orgId: string; readonly orgSlug: string; readonly name: string }

export type TokenLimits =
  | { readonly kind: "none" }
  | { readonly kind: "session" }
  | { readonly kind: "personal"; readonly scope: "full" | "read"; readonly repoId?: string | undefined }
  /** A service-account key: its scopes, and the user who created it (their role caps the key's). */
  | { readonly kind: "service"; readonly scopes: ReadonlyArray<Scope>; readonly creatorId?: string | undefined }

export type Resource =
  /** The caller's own account: whoami, personal keys. */
  | { readonly kind: "account" }
  | { readonly kind: "organization"; readonly orgId: string; readonly callerRole?: Role | undefined }
  | {
    readonly kind: "repository"
    readonly repoId: string
    readonly orgId: string
    readonly isPublic: boolean
    readonly callerRole?: Role | undefined
  }

export type Action = "read" | "write" | "merge" | "admin" | "release"

/**
 * What each action needs: the token scope and, on organizations and repositories, the caller's role.
 * Members read and push branches; merging onto `main` and changing a repository's settings
 * (visibility, transfer, delete, webhooks, secrets, site) need an admin or owner.
 */
const requirement: Record<Action, { readonly scope: Scope; readonly role: Role }> = {
  read: { scope: "read", role: "member" },
  write: { scope: "write", role: "member" },
  merge: { scope: "merge", role: "admin" },
  admin: { scope: "admin", role: "admin" },
  release: { scope: "release", role: "owner" }
}

export type Decision =
  | { readonly _tag: "Allow" }
  | { readonly _tag: "Deny"; readonly status: 401 | 404; readonly reason: string }
  | { readonly _tag: "Deny"; readonly status: 403; readonly reason: string; readonly missingScope?: Scope | undefined }

const allow: Decision = { _tag: "Allow" }
const notFound: Decision = { _tag: "Deny", status: 404, reason: "not found" }
const unauthenticated: Decision = { _tag: "Deny", status: 401, reason: "sign in required" }

// Shared and never changed (ReadonlySet): `decide` runs per request and needs no Set of its own.
const READ_ONLY: ReadonlySet<Scope> = new Set<Scope>(["read"])
const ALL_SCOPES: ReadonlySet<Scope> = new Set<Scope>(["read", "write", "merge", "admin", "release"])

/** The scopes a token carries. `release` is never implied by another scope. */
export const tokenScopes = (limits: TokenLimits): ReadonlySet<Scope> => {
  switch (limits.kind) {
    case "none":
      return READ_ONLY
    case "session":
      return ALL_SCOPES
    case "personal":
      return limits.scope === "read" ? READ_ONLY : ALL_SCOPES
    case "service":
      return new Set<Scope>(limits.scopes)
  }
}

const effectiveRole = (principal: Principal, callerRole: Role | undefined): Role | undefined =>
  principal.kind === "user" && principal.siteAdmin ? "owner" : callerRole

/** Whether the caller holds at least `need` in an organization (an instance admin counts as its owner). */
export const holdsRole = (principal: Principal, callerRole: Role | undefined, need: Role): boolean => {
  const role = effectiveRole(principal, callerRole)
  return role !== undefined && roleRank[role] >= roleRank[need]
}

/** Parses a key's `scopes` ("read,write"): every scope known, none twice, at least one; else undefined. */
export const parseScopes = (text: string): ReadonlyArray<Scope> | undefined => {
  const parts = text.split(",").map((part) => part.trim())
  if (parts.length === 0 || parts.some((part) => !(SCOPES as ReadonlyArray<string>).includes(part))) return undefined
  const unique = SCOPES.filter((scope) => parts.includes(scope))
  return unique.length === 0 ? undefined : unique
}

/** The scopes a holder of `role` may hand to a key: `release` only from an owner. */
export const grantableScopes = (role: Role | undefined): ReadonlyArray<Scope> =>
  role === undefined ? [] : role === "owner" ? SCOPES : SCOPES.filter((scope) => scope !== "release")

/** The denial for a key without the scope `scope`. */
const lacksScope = (scope: Scope): Decision => ({
  _tag: "Deny",
  status: 403,
  reason: `this token lacks the '${scope}' scope`,
  missingScope: scope
})

// Runs on every request: no closure per call (a bundle that keeps function names also names each one).
export const decide = (principal: Principal, limits: TokenLimits, resource: Resource, action: Action): Decision => {
  const need = requirement[action]
  const scopes = tokenScopes(limits)

  if (principal.kind === "anonymous") {
    // Anonymous callers see public repositories only, and may only read them.
    if (resource.kind === "repository" && resource.isPublic) return action === "read" ? allow : unauthenticated
    return resource.kind === "account" ? unauthenticated : notFound
  }

  const repoLimit = limits.kind === "personal" ? limits.repoId : undefined

  if (resource.kind === "account") {
    if (repoLimit !== undefined && action !== "read") {
      return { _tag: "Deny", status: 403, reason: "this key is limited to one repository" }
    }
    return scopes.has(need.scope) ? allow : lacksScope(need.scope)
  }

  const role = effectiveRole(principal, resource.callerRole)

  if (resource.kind === "organization") {
    if (repoLimit !== undefined) return notFound
    if (role === undefined) return notFound
    if (!scopes.has(need.scope)) return lacksScope(need.scope)
    if (roleRank[role] < roleRank[need.role]) {
      return { _tag: "Deny", status: 403, reason: `this action needs the '${need.role}' role in the organization` }
    }
    return allow
  }

  // Repository: visibility first, so a hidden repository answers exactly like a missing one.
  if (repoLimit !== undefined && repoLimit !== resource.repoId) return notFound
  const visible = resource.isPublic || role !== undefined
  if (!visible) return notFound
  if (!scopes.has(need.scope)) return lacksScope(need.scope)
  if (action === "read") return allow
  if (role === undefined) {
    return { _tag: "Deny", status: 403, reason: "only members of the owning organization may change this repository" }
  }
  if (roleRank[role] < roleRank[need.role]) {
    return { _tag: "Deny", status: 403, reason: `this action needs the '${need.role}' role in the owning organization` }
  }
  return allow
}
