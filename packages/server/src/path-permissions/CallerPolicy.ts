/**
 * The path policy of a request's caller, for the read paths: failures to read the permissions file
 * are the server's (503, retryable), never a reason to serve content.
 */
import { ApiErrors, type Caller } from "@grove/api"
import { Effect } from "effect"
import { chunkOwners } from "../content/ChunkReads.ts"
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

/** Of `blobs` (the repository's), those the caller may read at some path of a published commit. */
export const readableBlobsOf = (policy: Policy, repo: RepositoryRef, blobs: ReadonlyArray<string>) =>
  policy.open ? Effect.succeed(new Set(blobs)) : unavailable(Effect.gen(function*() {
    const permissions = yield* PathPermissions
    return yield* permissions.readableOf(policy, repo, blobs)
  }))

/** Of `chunks` (the repository's), those of a blob the caller may read. */
export const readableChunksOf = (policy: Policy, repo: RepositoryRef, chunks: ReadonlyArray<string>) =>
  policy.open ? Effect.succeed(new Set(chunks)) : unavailable(Effect.gen(function*() {
    const permissions = yield* PathPermissions
    const owners = yield* chunkOwners(repo.id, repo.orgId, chunks)
    const readable = yield* permissions.readableOf(policy, repo, [...new Set(owners.map((o) => o.blob))])
    return new Set(owners.filter((o) => readable.has(o.blob)).map((o) => o.chunk))
  }))
