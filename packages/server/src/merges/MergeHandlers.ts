/**
 * How main (and a branch) change besides pushes, each planned here and landed
 * as a Repository entity command with a compare-and-set:
 * - `POST /{owner}/{name}/branches/{branch}/merge[?force=1]`: squash merge onto main (MergePlanner);
 * - `GET /{owner}/{name}/branches/{branch}/merge-preview`: the same planning, written nowhere (a read);
 * - `POST /{owner}/{name}/branches/{branch}/sync`: the parent merged into the branch (SyncPlanner);
 * - `POST /{owner}/{name}/commits/{hash}/revert`: a commit undoing another (RevertPlanner).
 */
import { CurrentCaller, GroveApi } from "@grove/api"
import type { Inbox } from "@grove/bus"
import { Effect, Option, Schema } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import type { SqlClient } from "effect/sql"
import { Authorizer } from "../access/Authorizer.ts"
import { Branches } from "../content/Branches.ts"
import { loadCommitHeaders } from "../content/CommitHeaders.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { History } from "../content/History.ts"
import type { LandingRefused } from "./Landing.ts"
import * as MergeCommand from "./MergeCommand.ts"
import type { MergeError } from "./MergeCommand.ts"
import type * as SyncRevert from "./SyncRevertCommands.ts"
import { mergePayload, planMerge, previewMerge } from "./MergePlanner.ts"
import { planRevert, revertPayload } from "./RevertPlanner.ts"
import { planSync, syncPayload } from "./SyncPlanner.ts"
import { CommandNotApplied, type GatewayFailure } from "../entities/Sending.ts"
import { MergeGateway } from "./MergeGateway.ts"
import { PlanningTrees } from "./PlanningTrees.ts"
import { afterRepositoryWrite, Repositories } from "../access/Repositories.ts"
import { repositoryKey } from "../access/RepositoryRecord.ts"
import { actorName, writeRequest } from "../http/CallerContext.ts"
import { dbUnavailable, gatewayApiError, isGatewayFailure } from "../http/Failures.ts"
import { mergeApiError } from "./MergeErrors.ts"

const landingFailure = (error: MergeError | GatewayFailure) =>
  Effect.fail(isGatewayFailure(error) ? gatewayApiError(error) : mergeApiError(error))

const decodeStoredError = Schema.decodeUnknownOption(MergeCommand.MergeError)

/**
 * A retried write with an Idempotency-Key whose command already ran answers what it answered then.
 * Planning again would see the state the first attempt left (an already merged branch) and answer
 * differently, so the stored reply is checked before planning.
 */
const storedReply = (previous: Option.Option<Inbox.Operation>) =>
  Effect.gen(function*() {
    if (Option.isNone(previous)) return Option.none()
    const { commandId: operationId, reply } = previous.value
    // Still in flight (its node died, say): planned and sent again under the same id, the retry waits for
    // the first attempt's outcome, which the inbox applies once.
    if (reply === undefined) return Option.none()
    if (reply._tag === "Success") return Option.some(reply.value)
    if (reply._tag === "Failure") {
      const error = decodeStoredError(reply.error)
      if (Option.isSome(error)) return yield* Effect.fail(mergeApiError(error.value))
    }
    return yield* Effect.fail(gatewayApiError(new CommandNotApplied({ operationId })))
  })

export const MergeHandlers = HttpApiBuilder.group(GroveApi, "merges", Effect.fn(function*(handlers) {
  const authorizer = yield* Authorizer
  const gateway = yield* MergeGateway
  const repositories = yield* Repositories
  const context = yield* Effect.context<Branches | ContentObjects | History | PlanningTrees | SqlClient.SqlClient>()
  const plan = <A, E>(effect: Effect.Effect<A, E | LandingRefused, Branches | ContentObjects | History | PlanningTrees | SqlClient.SqlClient>) =>
    dbUnavailable(effect.pipe(Effect.provideContext(context))).pipe(
      Effect.catchIf((e): e is LandingRefused => (e as { _tag?: unknown })._tag === "LandingRefused", (e) => Effect.fail(mergeApiError(e)))
    )
  /** A landing changes the repository's row (its head when on main): this node's next read sees it at once. */
  const landedOn = (branch: string, commit: string) => (branch === "main" ? { head: commit } : {})
  /** The authorized repository, the actor, the command id, and the stored answer of an earlier attempt with the same key. */
  const begin = (params: { readonly owner: string; readonly name: string }, action: "write" | "merge") =>
    Effect.gen(function*() {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, action))
      const write = yield* writeRequest
      return { caller, repo, actor: yield* actorName, id: write.request, replay: yield* storedReply(write.previous) }
    })

  return handlers.handleAll({
    merge: Effect.fn("Merges.merge")(function*({ params, query }) {
      const { repo, actor, id, replay } = yield* begin(params, "merge")
      const force = query.force === "1" || query.force === "true"
      if (Option.isSome(replay)) return replay.value as MergeCommand.MergeSuccess
      const planned = yield* plan(planMerge(repo, params.branch, actor, force))
      const since = repositories.changesSeen()
      return yield* gateway.merge(repositoryKey(repo.owner, repo.name), mergePayload(planned, params.branch, actor), id).pipe(
        Effect.onExit(afterRepositoryWrite(repositories, repo, landedOn("main", planned.commitHash), since)),
        Effect.map((replied) => replied.value),
        Effect.catch(landingFailure)
      )
    }),
    preview: Effect.fn("Merges.preview")(function*({ params }) {
      const caller = yield* CurrentCaller
      const repo = yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "read"))
      return yield* plan(previewMerge(repo, params.branch))
    }),
    sync: Effect.fn("Merges.sync")(function*({ params }) {
      const { repo, actor, id, replay } = yield* begin(params, "write")
      if (Option.isSome(replay)) return replay.value as typeof SyncRevert.SyncSuccess.Type
      const planned = yield* plan(planSync(repo, params.branch, actor))
      if (planned.kind === "up_to_date") return { branch: params.branch, synced: false, head: planned.head }
      const payload = syncPayload(planned, params.branch, actor)
      const since = repositories.changesSeen()
      return yield* gateway.sync(repositoryKey(repo.owner, repo.name), payload, id).pipe(
        Effect.onExit(afterRepositoryWrite(repositories, repo, landedOn(payload.branch, payload.commit), since)),
        Effect.map((replied) => replied.value),
        Effect.catch(landingFailure)
      )
    }),
    revert: Effect.fn("Merges.revert")(function*({ params }) {
      const { caller, repo, actor, id, replay } = yield* begin(params, "write")
      if (Option.isSome(replay)) return replay.value as typeof SyncRevert.RevertSuccess.Type
      // Reverting on main changes main, which only mergers may do: checked before any planning work is written.
      const target = (yield* dbUnavailable(loadCommitHeaders(repo.id, [params.hash]).pipe(Effect.provideContext(context)))).get(params.hash)
      if (target?.branch_name === "main") yield* dbUnavailable(authorizer.repository(caller, params.owner, params.name, "merge"))
      const planned = yield* plan(planRevert(repo, params.hash, actor))
      const payload = revertPayload(planned, actor)
      const since = repositories.changesSeen()
      return yield* gateway.revert(repositoryKey(repo.owner, repo.name), payload, id).pipe(
        Effect.onExit(afterRepositoryWrite(repositories, repo, landedOn(payload.branch, payload.commit), since)),
        Effect.map((replied) => replied.value),
        Effect.catch(landingFailure)
      )
    })
  })
}))
