/**
 * `POST /api/{owner}/{name}/push`: the push is verified here (content/PushPreparation), outside the entity,
 * then lands as one Branch command.
 */
import { ApiErrors, CurrentCaller, GroveApi } from "@grove/api"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Authorizer } from "../access/Authorizer.ts"
import { repositoryKey } from "../access/RepositoryRecord.ts"
import { branchKey } from "../content/BranchCommands.ts"
import { BranchGateway } from "../content/BranchGateway.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { branchCommandFailure, contentFailure } from "../content/ContentFailures.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { MAIN_BRANCH, preparePush, pushBranchName } from "../content/PushPreparation.ts"
import { actorName, commandRequest } from "../http/CallerContext.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { dedupScope } from "../path-permissions/DedupScope.ts"

export const pushHandlers = Effect.gen(function*() {
  const authorizer = yield* Authorizer
  const objects = yield* ContentObjects
  const chunkStore = yield* ChunkStore
  const gateway = yield* BranchGateway
  const services = Effect.provideService(ContentObjects, objects)
  const withChunks = Effect.provideService(ChunkStore, chunkStore)

  const push = HttpApiBuilder.handler(GroveApi, "sync", "push", Effect.fn("Sync.push")(function*({ params, payload }) {
    const caller = yield* CurrentCaller
    const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "write"))
    const branchName = pushBranchName(payload)
    if (branchName === MAIN_BRANCH) {
      return yield* new ApiErrors.Forbidden({
        error: "main changes only by merge or revert: push a branch and merge it",
        code: "main_protected"
      })
    }
    const scope = yield* dbUnavailable(dedupScope(caller, repo).pipe(services))
    const prepared = yield* contentFailure(preparePush(repo, payload, scope).pipe(services, withChunks))
    const stagedId = prepared.commits.length === 0
      ? null
      : yield* dbUnavailable(objects.stagePush(repo.id, { trees: prepared.newTrees, blobs: prepared.newBlobs }))
    return yield* gateway.push(branchKey(repositoryKey(repo.owner, repo.name), prepared.branchName), {
      stagedId,
      commits: prepared.commits,
      tip: prepared.tip,
      force: payload.force ?? false,
      branch: payload.branch ?? null,
      actor: yield* actorName
    }, yield* commandRequest).pipe(Effect.catch(branchCommandFailure))
  }))
  return { push }
})
