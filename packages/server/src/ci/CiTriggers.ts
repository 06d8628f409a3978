/**
 * Automatic triggers: a consumer of `grove.events` (group `grove.ci-triggers`, partitions shared
 * out over the nodes) turns each `push`, `branch.created` and `merge` into runs of the workflows
 * whose `on` has that event, at the event's commit (for a merge: the squash commit on main).
 * The QueueCiRuns command's id is derived from the event's id, so an event seen twice (the
 * consumer killed before its offset was committed) queues its runs once: the inbox replays.
 */
import { Bus, Topics } from "@grove/bus"
import { Cause, Effect, Layer, Option, Schedule, Stream } from "effect"
import { branchKey } from "../content/BranchCommands.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { type RepositoryEvent, repositoryEventOf } from "../events/RepositoryEvent.ts"
import { Repositories } from "../repos/Repositories.ts"
import { repositoryKey } from "../repos/RepositoryRecord.ts"
import { CiGateway } from "./CiGateway.ts"
import { planRun, selectWorkflows } from "./RunPlanner.ts"
import { workflowsAt } from "./WorkflowFiles.ts"

export const TRIGGER_GROUP = "grove.ci-triggers"
export const CiTriggersLive = Layer.effectDiscard(Effect.gen(function*() {
  const bus = yield* Bus.Bus
  const gateway = yield* CiGateway
  const repositories = yield* Repositories
  const objects = yield* ContentObjects
  const chunks = yield* ChunkStore

  const handle = Effect.fnUntraced(function*(event: RepositoryEvent & { readonly branch: string; readonly commit: string }) {
    const found = yield* repositories.findById(event.repository_id)
    if (Option.isNone(found)) return
    const repo = found.value
    // A merge's runs are on main, at the new squash commit.
    const branch = event.type === "merge" ? "main" : event.branch
    const workflows = yield* workflowsAt(repo, event.commit).pipe(
      Effect.provideService(ContentObjects, objects),
      Effect.provideService(ChunkStore, chunks),
      Effect.catchTag("CommitNotFound", () => Effect.succeed([]))
    )
    const chosen = selectWorkflows(workflows, event.type)
    if (chosen.length === 0) return
    yield* gateway.queue(branchKey(repositoryKey(repo.owner, repo.name), branch), {
      event: event.type,
      commit: event.commit,
      requireHead: false,
      trigger: null,
      queueLimit: null,
      triggeredBy: event.pusher ?? "system",
      runs: chosen.map(planRun)
    }, { commandId: `ci-trigger:${event.id}`, owner: "system:ci-triggers" }).pipe(
      // The branch or repository went meanwhile: nothing to run.
      Effect.catchTags({ BranchNotFound: () => Effect.void, BranchRepositoryGone: () => Effect.void })
    )
  })

  yield* bus.consume(TRIGGER_GROUP, Topics.events, (claim) =>
    claim.records.pipe(
      Stream.runForEach((record) =>
        Effect.gen(function*() {
          const event = repositoryEventOf(record.value)
          if (event !== undefined && typeof event.branch === "string" && typeof event.commit === "string") {
            // Retried for about ten minutes (the command id makes a retry harmless); then the event is left, loudly.
            yield* handle({ ...event, branch: event.branch, commit: event.commit }).pipe(
              Effect.tapCause((cause) => Effect.logWarning(`CI trigger for event ${event.id} failed; retrying`, Cause.squash(cause))),
              Effect.retry({ schedule: Schedule.exponential("200 millis", 1.5), times: 20 }),
              Effect.catchCause((cause) => Effect.logError(`CI trigger for event ${event.id} gave up: no runs were started`, Cause.squash(cause)))
            )
          }
          yield* claim.commit(record.offset)
        })
      )
    ))
}))
