/**
 * Automatic triggers: a consumer of `grove.events` (group `grove.ci-triggers`, partitions shared
 * out over the nodes) turns each `push`, `branch.created` and `merge` into runs of the workflows
 * whose `on` has that event, at the event's commit (for a merge: the squash commit on main); a
 * branch's first push also runs the `push` workflows (`batchesFor`).
 * The QueueCiRuns command's id is derived from the event's id, so an event seen twice (the
 * consumer killed before its offset was committed) queues its runs once: the inbox replays.
 */
import type { ParsedWorkflow, WorkflowEvent } from "@grove/core/ci/Workflow"
import { Bus, Topics } from "@grove/bus"
import { Cause, Effect, Layer, Option, Schedule, Stream } from "effect"
import { branchKey } from "../content/BranchCommands.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { type RepositoryEvent, repositoryEventOf } from "../events/RepositoryEvent.ts"
import { Repositories } from "../access/Repositories.ts"
import { repositoryKey } from "../access/RepositoryRecord.ts"
import { CiGateway } from "./CiGateway.ts"
import { planRun, selectWorkflows } from "./RunPlanner.ts"
import { workflowsAt } from "./WorkflowFiles.ts"

export const TRIGGER_GROUP = "grove.ci-triggers"

/**
 * The runs an event starts, by the event they are recorded under. A branch's first push is
 * `branch.created`, yet, as on GitHub, `on: [push]` runs on it too: a workflow that has `push` but not
 * `branch.created` runs as a `push` (its own queuing command, so each set is queued once). A workflow
 * with both runs once, as `branch.created`.
 */
export const batchesFor = (event: WorkflowEvent, workflows: ReadonlyArray<ParsedWorkflow>) => {
  const chosen = selectWorkflows(workflows, event)
  if (event !== "branch.created") return [{ as: event, chosen, suffix: "" }]
  const pushOnly = workflows.filter((parsed) => parsed._tag === "Valid" && parsed.workflow.on.includes("push") && !chosen.includes(parsed))
  return [{ as: event, chosen, suffix: "" }, { as: "push" as const, chosen: pushOnly, suffix: ":push" }]
}

export const CiTriggersLive = Layer.effectDiscard(Effect.gen(function*() {
  const bus = yield* Bus.Bus
  const gateway = yield* CiGateway
  const repositories = yield* Repositories
  const objects = yield* ContentObjects
  const chunks = yield* ChunkStore

  const handle = Effect.fnUntraced(function*(event: RepositoryEvent & { readonly branch: string; readonly commit: string }) {
    // The record this node has cached for the event's name, if it is still this repository (else it was renamed,
    // or deleted and made again): the repository is read only when it is not cached.
    const cached = event.owner === undefined || event.repo === undefined ? undefined : repositories.cachedByFullName(event.owner, event.repo)
    const found = cached?.id === event.repository_id ? Option.some(cached) : yield* repositories.findById(event.repository_id)
    if (Option.isNone(found)) return
    const repo = found.value
    // A merge's runs are on main, at the new squash commit. The statement that published it wrote the event with
    // its root tree, so the commit need not be read (an event from an older node has none: read and checked).
    const branch = event.type === "merge" ? "main" : event.branch
    const tree = event.type === "merge" && typeof event.tree === "string" ? event.tree : undefined
    const workflows = yield* workflowsAt(repo, event.commit, tree).pipe(
      Effect.provideService(ContentObjects, objects),
      Effect.provideService(ChunkStore, chunks),
      Effect.catchTag("CommitNotFound", () => Effect.succeed([]))
    )
    for (const { as, chosen, suffix } of batchesFor(event.type, workflows)) {
      if (chosen.length === 0) continue
      yield* gateway.queue(branchKey(repositoryKey(repo.owner, repo.name), branch), {
        event: as,
        commit: event.commit,
        requireHead: false,
        trigger: null,
        queueLimit: null,
        triggeredBy: event.pusher ?? "system",
        runs: chosen.map(planRun)
      }, { commandId: `ci-trigger:${event.id}${suffix}`, owner: "system:ci-triggers" }).pipe(
        // The branch or repository went meanwhile: nothing to run.
        Effect.catchTags({ BranchNotFound: () => Effect.void, BranchRepositoryGone: () => Effect.void })
      )
    }
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
