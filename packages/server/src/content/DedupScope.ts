/**
 * Dedup must never grant access: whether an object "is already there" is answered per caller, from
 * the repositories that caller can read (within its key's repository limit) and what it uploaded
 * itself, never from the organization's whole store.
 */
import type { Caller } from "@grove/api"
import { Access } from "@grove/core"
import { Effect } from "effect"
import { ContentObjects, type DedupScope } from "./ContentObjects.ts"

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

/** The scope of a caller that was allowed to write `repo`. */
export const dedupScope = Effect.fnUntraced(function*(
  caller: Caller,
  repo: { readonly id: string; readonly orgId: string; readonly callerRole: Access.Role | undefined }
) {
  const objects = yield* ContentObjects
  const repos = yield* objects.orgRepositories(repo.orgId)
  const scope: DedupScope = {
    orgId: repo.orgId,
    repoId: repo.id,
    // Anonymous callers never write; the placeholder matches no upload.
    principal: principalKey(caller.principal) ?? "anonymous",
    readable: readableRepositories(caller, repo.orgId, repo.callerRole, repos)
  }
  return scope
})
