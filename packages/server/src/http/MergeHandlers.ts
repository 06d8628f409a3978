/**
 * `POST /{owner}/{name}/branches/{branch}/merge[?force=1]`: plans the squash
 * merge here (MergePlanner), then lands it as the Repository entity's Merge
 * command with a compare-and-set on both heads.
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { Branches } from "../content/Branches.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { History } from "../content/History.ts"
import { planMerge } from "../content/MergePlanner.ts"
import { RepositoryGateway } from "../entities/RepositoryGateway.ts"
import { Repositories } from "../repos/Repositories.ts"
import { repositoryKey } from "../repos/RepositoryRecord.ts"
import { actorName, commandId } from "./CallerContext.ts"
import { dbUnavailable } from "./Failures.ts"
import { mergeApiError } from "./MergeErrors.ts"

export const MergeHandlers = HttpApiBuilder.group(GroveApi, "merges", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const gateway = yield* RepositoryGateway
  const repositories = yield* Repositories
  const context = yield* Effect.context<Branches | ContentObjects | History>()

  return handlers.handleAll({
    merge: Effect.fn("Merges.merge")(function*({ params, query }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "merge"))
      const force = query.force === "1" || query.force === "true"
      const actor = yield* actorName
      const plan = yield* dbUnavailable(planMerge(repo, params.branch, actor).pipe(Effect.provideContext(context))).pipe(
        Effect.catchTag("MergeRefused", (e) => Effect.fail(mergeApiError(e)))
      )
      return yield* gateway.merge(repositoryKey(repo.owner, repo.name), {
        branch: params.branch,
        expectedMainHead: plan.mainHead,
        expectedBranchHead: plan.branchHead,
        commit: plan.commitHash,
        manifest: plan.manifestHash,
        message: plan.message,
        stagedId: plan.stagedId,
        force,
        actor
      }, yield* commandId).pipe(
        // The repository's head changes: this node's next read sees it at once.
        Effect.ensuring(Effect.sync(() => repositories.invalidate(repo.owner, repo.name))),
        Effect.catch((error) => {
          switch (error._tag) {
            case "CommandPending":
              return Effect.fail(new ApiErrors.OperationPending({ error: "the merge is still in progress; poll the operation", code: "pending", operation_id: error.operationId }))
            case "CommandUnavailable":
              return Effect.fail(new ApiErrors.ServiceUnavailable({ error: error.message, code: "unavailable", retryable: true }))
            default:
              return Effect.fail(mergeApiError(error))
          }
        })
      )
    })
  })
}))
