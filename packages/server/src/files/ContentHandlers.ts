/** Directory listings at a commit, and an organization's storage against its quota. */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { CommitPaths, pathSegments } from "../content/CommitPaths.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { callerPolicy } from "../path-permissions/CallerPolicy.ts"
import { dbUnavailable } from "../http/Failures.ts"

export const ContentHandlers = HttpApiBuilder.group(GroveApi, "content", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const paths = yield* CommitPaths
  const objects = yield* ContentObjects

  const listing = Effect.fnUntraced(function*(owner: string, name: string, ref: string, path: string) {
    const caller = yield* CurrentCaller
    const repo = yield* dbUnavailable(authorizer.repository(caller, owner, name, "read"))
    const segments = pathSegments(path)
    if (!segments.ok) return yield* new ApiErrors.BadRequest({ error: segments.reason, code: "invalid_path" })
    const commit = yield* dbUnavailable(paths.resolveCommit(repo.id, ref))
    if (commit === undefined) return yield* new ApiErrors.NotFound({ error: `commit '${ref.slice(0, 100)}' not found`, code: "commit_not_found" })
    const target = yield* dbUnavailable(paths.resolvePath(repo.orgId, commit.manifest_hash, segments.segments))
    // Files the caller may not read (path permissions) are left out, as a pull leaves them out: no hash, no size.
    const policy = yield* callerPolicy(caller, repo)
    if (target === undefined || (target.kind === "blob" && !policy.canRead(segments.segments.join("/")))) {
      return yield* new ApiErrors.NotFound({ error: `no such path '${path.slice(0, 200)}'`, code: "path_not_found" })
    }
    if (target.kind === "blob") {
      return yield* new ApiErrors.BadRequest({ error: `'${path.slice(0, 200)}' is a file; read it with raw/`, code: "not_a_directory" })
    }
    const prefix = segments.segments.join("/")
    const pathOf = (name: string) => prefix === "" ? name : `${prefix}/${name}`
    const shown = target.entries.filter((e) => e.kind !== "blob" || policy.canRead(pathOf(e.name)))
    const sizes = yield* dbUnavailable(objects.blobSizes(repo.orgId, shown.filter((e) => e.kind === "blob").map((e) => e.hash)))
    return {
      commit: commit.hash,
      path: prefix,
      hash: target.hash,
      entries: shown.map((e) => ({
        name: e.name,
        path: pathOf(e.name),
        kind: e.kind,
        mode: e.mode,
        hash: e.hash,
        ...(e.kind === "blob" ? { size: sizes.get(e.hash) ?? 0 } : {})
      }))
    }
  })

  return handlers.handleAll({
    tree: ({ params }) => listing(params.owner, params.name, params.commit, params["*"] ?? ""),
    orgStorage: Effect.fnUntraced(function*({ params }) {
      const caller = yield* CurrentCaller
      const org = yield* dbUnavailable(authorizer.organization(caller, params.slug, "read"))
      const usage = yield* dbUnavailable(objects.orgUsage(org.id))
      return { slug: org.slug, used_bytes: usage.usedBytes, quota_bytes: usage.quotaBytes }
    })
  })
}))
