/**
 * Dedup must never grant access: whether an object "is already there" is answered per caller, from
 * the repositories that caller can read (within its key's repository limit) and what it uploaded
 * itself, never from the organization's whole store; and where path permissions withhold something
 * from the caller, only from what it may read at a branch head there.
 */
import type { Caller } from "@grove/api"
import { Access } from "@grove/core"
import { Effect } from "effect"
import { unavailable } from "./CallerPolicy.ts"
import { PathPermissions } from "./PathPermissions.ts"
import { ContentObjects, type DedupScope, type RestrictedRepository, type Uploader } from "../content/ContentObjects.ts"

/** The stable name of whoever uploads: `user:<id>` or `service_account:<id>`; undefined for anonymous callers. */
export const principalKey = (principal: Access.Principal): string | undefined =>
  principal.kind === "user" ? `user:${principal.userId}` : principal.kind === "service_account" ? `service_account:${principal.accountId}` : undefined

/** The repositories of `orgId`, as the caller may read them, and the decision for each. */
export const readableRepositories = (
  caller: Caller,
  orgId: string,
  callerRole: Access.Role | undefined,
  repos: ReadonlyArray<{ readonly id: string; readonly isPublic: boolean }>
): Array<string> =>
  repos.filter((r) =>
    Access.decide(caller.principal, caller.limits, { kind: "repository", repoId: r.id, orgId, isPublic: r.isPublic, callerRole }, "read")._tag ===
      "Allow"
  ).map((r) => r.id)

/** The uploader a caller allowed to write `repo` is (no lookup: recording an upload needs nothing more). */
export const uploader = (caller: Caller, repo: { readonly id: string }): Uploader => ({
  repoId: repo.id,
  // Anonymous callers never write; the placeholder matches no upload.
  principal: principalKey(caller.principal) ?? "anonymous"
})

/** The scope of a caller that was allowed to write `repo`. */
export const dedupScope = Effect.fnUntraced(function*(
  caller: Caller,
  repo: { readonly id: string; readonly orgId: string; readonly owner: string; readonly callerRole: Access.Role | undefined }
) {
  const objects = yield* ContentObjects
  const permissions = yield* PathPermissions
  const repos = yield* objects.orgRepositories(repo.orgId)
  const readable = readableRepositories(caller, repo.orgId, repo.callerRole, repos)
  // The organization's repositories share its owner slug and the caller's role in it.
  const refs = readable.map((id) => ({ id, orgId: repo.orgId, owner: repo.owner, callerRole: repo.callerRole }))
  const policies = yield* unavailable(permissions.policies(caller, refs))
  const restricted: Array<RestrictedRepository> = []
  for (const ref of refs) {
    const policy = policies.get(ref.id)
    if (policy === undefined || policy.open) continue
    restricted.push({
      repoId: ref.id,
      canRead: policy.canRead,
      readableBlobs: yield* Effect.cached(permissions.readableAtHeads(policy, ref))
    })
  }
  const scope: DedupScope = { ...uploader(caller, repo), orgId: repo.orgId, readable, restricted }
  return scope
})
