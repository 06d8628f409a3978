/** Directory listings at a commit, and an organization's storage against its quota. */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { pathAt } from "./FileReads.ts"

export const ContentHandlers = HttpApiBuilder.group(GroveApi, "content", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const objects = yield* ContentObjects

  // The API's listing is the pages' read (FileReads.pathAt): one copy of the path rules.
  const listing = Effect.fnUntraced(function*(owner: string, name: string, ref: string, path: string) {
    const caller = yield* CurrentCaller
    const repo = yield* dbUnavailable(authorizer.repository(caller, owner, name, "read"))
    const at = yield* pathAt(caller, repo, ref, path)
    if (at.kind === "blob") {
      return yield* new ApiErrors.BadRequest({ error: `'${path.slice(0, 200)}' is a file; read it with raw/`, code: "not_a_directory" })
    }
    return { commit: at.commit.hash, path: at.path, hash: at.hash, entries: at.entries }
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
