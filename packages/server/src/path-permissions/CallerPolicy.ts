/**
 * The path policy of a request's caller, for the read paths: failures to read the permissions file
 * are the server's (503, retryable), never a reason to serve content.
 */
import { ApiErrors, type Caller } from "@grove/api"
import { Effect } from "effect"
import { type Policy, PathPermissions, type RepositoryRef } from "./PathPermissions.ts"

/** Any failure to read the permissions is the server's: 503, retryable. */
export const unavailable = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.catch((error) =>
      Effect.logWarning("path permissions could not be read", error).pipe(
        Effect.andThen(Effect.fail(new ApiErrors.ServiceUnavailable({ error: "path permissions could not be read; try again", code: "unavailable", retryable: true })))
      )
    )
  )

export const callerPolicy = (caller: Caller, repo: RepositoryRef): Effect.Effect<Policy, ApiErrors.ServiceUnavailable, PathPermissions> =>
  unavailable(Effect.gen(function*() {
    const permissions = yield* PathPermissions
    return yield* permissions.policy(caller, repo)
  }))

/** Blobs withheld from the caller at the repository's branch heads (hash-addressed reads). */
export const withheldAtHeads = (policy: Policy, repo: RepositoryRef) =>
  unavailable(Effect.gen(function*() {
    const permissions = yield* PathPermissions
    return yield* permissions.withheldAtHeads(policy, repo)
  }))

/** Blobs withheld from the caller in the trees under `roots`. */
export const withheldIn = (policy: Policy, orgId: string, roots: ReadonlyArray<string>) =>
  unavailable(Effect.gen(function*() {
    const permissions = yield* PathPermissions
    return yield* permissions.withheldIn(policy, orgId, roots)
  }))

/** Chunks withheld from the caller at the repository's branch heads. */
export const withheldChunksAtHeads = (policy: Policy, repo: RepositoryRef) =>
  Effect.gen(function*() {
    if (policy.open) return new Set<string>()
    const blobs = yield* withheldAtHeads(policy, repo)
    return yield* unavailable(Effect.gen(function*() {
      const permissions = yield* PathPermissions
      return yield* permissions.withheldChunks(repo.orgId, blobs)
    }))
  })
