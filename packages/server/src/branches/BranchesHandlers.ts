/**
 * Branch endpoints of the spec. Reads go to the database; create, close and
 * reopen are Branch entity commands (`owner/name:branch`).
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { branchKey } from "../content/BranchCommands.ts"
import { BranchGateway } from "../content/BranchGateway.ts"
import { toApiBranch } from "../content/BranchRecord.ts"
import { Branches } from "../content/Branches.ts"
import { repositoryKey } from "../access/RepositoryRecord.ts"
import { actorName, commandRequest } from "../http/CallerContext.ts"
import { branchCommandFailure } from "../content/ContentFailures.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { pageRequest, pageResponse } from "../http/Pagination.ts"

export const BranchesHandlers = HttpApiBuilder.group(GroveApi, "branches", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const branches = yield* Branches
  const gateway = yield* BranchGateway

  const repository = (owner: string, name: string, action: "read" | "write") =>
    Effect.gen(function*() {
      const caller = yield* CurrentCaller
      return yield* dbUnavailable(authorizer.repository(caller, owner, name, action))
    })
  const notFound = (branch: string) => new ApiErrors.NotFound({ error: `branch '${branch}' not found`, code: "branch_not_found" })

  return handlers.handleAll({
    list: Effect.fnUntraced(function*({ params, query }) {
      const repo = yield* repository(params.owner, params.name, "read")
      const page = yield* pageRequest(query, ["boolean", "timestamp", "text"])
      const rows = yield* dbUnavailable(branches.listPage(repo.id, query.status, page))
      // main first, then the most recently updated.
      return { branches: (yield* pageResponse(rows, page)).map(toApiBranch) }
    }),
    create: Effect.fn("Branches.create")(function*({ params, payload }) {
      const repo = yield* repository(params.owner, params.name, "write")
      // The name, the parent and the description were checked by the payload's schema (ApiFields).
      const parent = payload.parent_branch ?? "main"
      return yield* gateway.create(branchKey(repositoryKey(repo.owner, repo.name), payload.name), {
        description: payload.description ?? null,
        parentBranch: parent,
        actor: yield* actorName
      }, yield* commandRequest).pipe(Effect.catch(branchCommandFailure))
    }),
    get: Effect.fnUntraced(function*({ params, query }) {
      const repo = yield* repository(params.owner, params.name, "read")
      const branch = yield* dbUnavailable(branches.get(repo.id, params.branch))
      if (branch === undefined) return yield* notFound(params.branch)
      if (query.record_read !== "1" && query.record_read !== "true") return toApiBranch(branch)
      const { principal } = yield* CurrentCaller
      if (principal.kind === "anonymous") {
        return yield* new ApiErrors.Unauthorized({ error: "sign in to record that you read a branch", code: "unauthenticated" })
      }
      const readers = yield* dbUnavailable(branches.recordRead(repo.id, branch.name, yield* actorName))
      return { ...toApiBranch(branch), readers: readers.map((r) => ({ name: r.name, read_at: r.readAt.toISOString() })) }
    }),
    close: Effect.fn("Branches.close")(function*({ params }) {
      const repo = yield* repository(params.owner, params.name, "write")
      return yield* gateway.close(branchKey(repositoryKey(repo.owner, repo.name), params.branch), {
        reason: null,
        actor: yield* actorName
      }, yield* commandRequest).pipe(Effect.catch(branchCommandFailure))
    }),
    reopen: Effect.fn("Branches.reopen")(function*({ params }) {
      const repo = yield* repository(params.owner, params.name, "write")
      return yield* gateway.reopen(branchKey(repositoryKey(repo.owner, repo.name), params.branch), {
        actor: yield* actorName
      }, yield* commandRequest).pipe(Effect.catch(branchCommandFailure))
    }),
    rename: Effect.fnUntraced(function*({ params }) {
      yield* repository(params.owner, params.name, "write")
      return yield* new ApiErrors.ServiceUnavailable({ error: "renaming branches is temporarily disabled", code: "rename_disabled" })
    })
  })
}))
