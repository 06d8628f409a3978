/**
 * The CI endpoints: reads straight from the database; starting runs, the exact-head trigger,
 * cancelling and secrets go to the entities (Branch, CiRun, Repository). Reading needs read
 * access; everything else write access (a key without `write` gets 403 naming it).
 */
import { ApiErrors, GroveApi } from "@grove/api"
import type { WorkflowEvent } from "@grove/core/ci/Workflow"
import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"
import { callerRepository } from "../access/Authorizer.ts"
import { DEFAULT_CI, ServerConfig } from "../Config.ts"
import { Branches } from "../content/Branches.ts"
import { ChunkStore } from "../content/ChunkStore.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { actorName, commandRequest } from "../http/CallerContext.ts"
import { contentFailure } from "../content/ContentFailures.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { repositoryKey, type RepositoryRecord } from "../access/RepositoryRecord.ts"
import { ciCommandFailure } from "./CiErrors.ts"
import { CiGateway } from "./CiGateway.ts"
import type { PlannedRun, QueuePayload } from "./CiQueueCommand.ts"
import { CiLogStore } from "./CiLogStore.ts"
import { runKey, toApiRun, withJobs } from "./CiRecord.ts"
import { CiRuns } from "./CiRuns.ts"
import { makeStartQueue } from "./CiStartQueue.ts"
import { CiWake } from "./CiWake.ts"
import { SecretBox } from "./CiSecrets.ts"
import { planRun, selectWorkflows } from "./RunPlanner.ts"
import { workflowsAt } from "./WorkflowFiles.ts"

const notFound = (error: string) => new ApiErrors.NotFound({ error, code: "not_found" })
const unavailable = (what: string) => () => new ApiErrors.ServiceUnavailable({ error: `${what} could not be read; try again`, code: "unavailable", retryable: true })

export const CiHandlers = HttpApiBuilder.group(GroveApi, "ci", Effect.fn(function*(handlers) {
  const runs = yield* CiRuns
  const logs = yield* CiLogStore
  const gateway = yield* CiGateway
  const branches = yield* Branches
  const box = yield* SecretBox
  const sql = yield* SqlClient.SqlClient
  const objects = yield* ContentObjects
  const chunks = yield* ChunkStore
  const config = yield* ServerConfig
  const wake = yield* CiWake
  const startQueue = yield* makeStartQueue(config.commandTimeoutMs)
  const queueLimit = (config.ci ?? DEFAULT_CI).queueLimit

  const repository = callerRepository

  /** Queues runs, with a runner of this node reserved when one is free (CiStartQueue). */
  const queueOrMoved = (repo: RepositoryRecord, branch: string, payload: Omit<typeof QueuePayload.Type, "startOn">, headMoved: "fail" | "undefined") =>
    Effect.flatMap(commandRequest, (request) => startQueue(repositoryKey(repo.owner, repo.name), branch, payload, headMoved, request))
  /** queueOrMoved, failing (412) when the payload's exact head moved. */
  const queueHere = (repo: RepositoryRecord, branch: string, payload: Omit<typeof QueuePayload.Type, "startOn">) =>
    // Undefined only for a moved head taken as undefined.
    Effect.map(queueOrMoved(repo, branch, payload, "fail"), (queued) => queued!)

  /** The workflows at `commit` chosen for a manual start (by name, or all that take `manual`); 404 when none. */
  const chosenAt = (repo: RepositoryRecord, commit: string, event: WorkflowEvent, workflow: string | null | undefined) =>
    Effect.gen(function*() {
      const all = yield* contentFailure(workflowsAt(repo, commit).pipe(
        Effect.provideService(ContentObjects, objects),
        Effect.provideService(ChunkStore, chunks)
      )).pipe(
        Effect.catchTag("CommitNotFound", () => Effect.fail(notFound(`commit ${commit} not found`))),
        Effect.catchTag("StoredObjectMissing", (error) =>
          Effect.logError("stored content is missing", error).pipe(Effect.andThen(Effect.fail(unavailable("the workflow files")()))))
      )
      const chosen = selectWorkflows(all, event, workflow)
      if (chosen.length === 0) {
        return yield* workflow === undefined || workflow === null
          ? notFound(`no workflow in .oak/workflows/ at ${commit.slice(0, 12)} runs on ${event}`)
          : notFound(`workflow '${workflow}' not found in .oak/workflows/ at ${commit.slice(0, 12)}`)
      }
      return chosen.map(planRun)
    })

  const runOf = (repo: RepositoryRecord, id: string) =>
    Effect.gen(function*() {
      const run = yield* dbUnavailable(runs.get(repo.id, Number(id)))
      if (run === undefined) return yield* notFound(`CI run ${id} not found`)
      return run
    })

  return handlers.handleAll({
    capabilities: Effect.fn(function*({ params }) {
      yield* repository(params, "read")
      return { ordinary_trigger_v1: 1 }
    }),
    runs: Effect.fn(function*({ params, query }) {
      const repo = yield* repository(params, "read")
      const list = yield* dbUnavailable(runs.list(repo.id, query.limit === undefined ? 50 : Number(query.limit)))
      return list.map(toApiRun)
    }),
    run: Effect.fn(function*({ params, query }) {
      const repo = yield* repository(params, "read")
      const run = yield* runOf(repo, params.id)
      const withLogs = query.logs !== "false" && query.logs !== "0"
      const stepLogs = withLogs ? yield* logs.byStep(repo.orgId, run.id).pipe(Effect.mapError(unavailable("the run's logs"))) : undefined
      return withJobs(run, stepLogs)
    }),
    start: Effect.fn(function*({ params, payload }) {
      const repo = yield* repository(params, "write")
      const branchName = payload.branch ?? "main"
      const triggeredBy = yield* actorName
      const manual = (commit: string, requireHead: boolean, runs: ReadonlyArray<PlannedRun>) =>
        ({ event: "manual" as const, commit, requireHead, trigger: null, queueLimit, triggeredBy, runs })
      // At the head: planned at the one this node last saw, without reading the branch, and started only while it is
      // still the head (the command checks, under the branch's lock). Not the head, or its workflows not found: read
      // as below. Not with an Idempotency-Key, whose first command's answer (head moved) a retry would replay.
      const seen = payload.commit == null && (yield* commandRequest).commandId === undefined ? wake.head(repo.id, branchName) : undefined
      if (seen !== undefined) {
        const planned = yield* Effect.option(chosenAt(repo, seen, "manual", payload.workflow))
        const queued = Option.isSome(planned) ? yield* queueOrMoved(repo, branchName, manual(seen, true, planned.value), "undefined") : undefined
        if (queued !== undefined) return { run_ids: queued.run_ids }
      }
      const branch = yield* dbUnavailable(branches.get(repo.id, branchName))
      wake.sawHead(repo.id, branchName, branch?.head ?? undefined)
      if (branch === undefined) return yield* notFound(`branch '${branchName}' not found`)
      const commit = payload.commit ?? branch.head
      if (commit === null) return yield* notFound(`branch '${branchName}' has no commits to run`)
      const planned = yield* chosenAt(repo, commit, "manual", payload.workflow)
      const queued = yield* queueHere(repo, branchName, manual(commit, false, planned))
      return { run_ids: queued.run_ids }
    }),
    trigger: Effect.fn(function*({ params, payload }) {
      const repo = yield* repository(params, "write")
      const workflow = payload.workflow ?? null
      const fingerprint = createHash("sha256").update(JSON.stringify([payload.branch, payload.expected_commit, workflow])).digest("hex")
      const receipt = (q: { readonly run_ids: ReadonlyArray<number>; readonly replayed: boolean }) => ({
        protocol: "ordinary_trigger_v1" as const,
        branch: payload.branch,
        commit_hash: payload.expected_commit,
        run_ids: q.run_ids,
        replayed: q.replayed
      })
      // A replay answers what the first request started, even after the head moved on.
      const seen = yield* dbUnavailable(sql<{ fingerprint: string; run_ids: unknown }>`SELECT fingerprint, run_ids FROM ci_triggers
        WHERE repo_id = ${repo.id} AND idempotency_key = ${payload.idempotency_key}`)
      if (seen[0] !== undefined) {
        if (seen[0].fingerprint !== fingerprint) {
          return yield* new ApiErrors.Conflict({ error: "this idempotency_key was used for a different request; nothing was started", code: "idempotency_key_reused" })
        }
        const ids = typeof seen[0].run_ids === "string" ? JSON.parse(seen[0].run_ids) : seen[0].run_ids
        return receipt({ run_ids: ids as ReadonlyArray<number>, replayed: true })
      }
      const branch = yield* dbUnavailable(branches.get(repo.id, payload.branch))
      if (branch === undefined) return yield* notFound(`branch '${payload.branch}' not found`)
      if (branch.head !== payload.expected_commit) {
        return yield* new ApiErrors.PreconditionFailed({
          error: `branch '${payload.branch}' is no longer at the expected commit (its head is ${branch.head ?? "empty"}); nothing was started`,
          code: "head_moved"
        })
      }
      const planned = yield* chosenAt(repo, payload.expected_commit, "manual", workflow)
      const queued = yield* queueHere(repo, payload.branch, {
        event: "manual",
        commit: payload.expected_commit,
        requireHead: true,
        trigger: { key: payload.idempotency_key, fingerprint },
        queueLimit,
        triggeredBy: yield* actorName,
        runs: planned
      })
      return receipt(queued)
    }),
    cancel: Effect.fn(function*({ params }) {
      const repo = yield* repository(params, "write")
      const run = yield* runOf(repo, params.id)
      yield* gateway.cancel(runKey(repositoryKey(repo.owner, repo.name), run.id), { actor: yield* actorName }, yield* commandRequest).pipe(
        Effect.catch(ciCommandFailure)
      )
    }),
    secrets: Effect.fn(function*({ params }) {
      const repo = yield* repository(params, "read")
      return { secrets: yield* dbUnavailable(runs.secretNames(repo.id)) }
    }),
    setSecret: Effect.fn(function*({ params, payload }) {
      const repo = yield* repository(params, "write")
      return yield* gateway.setSecret(repositoryKey(repo.owner, repo.name), {
        name: payload.name,
        sealed: box.seal(repo.id, payload.name, payload.value),
        actor: yield* actorName
      }, yield* commandRequest).pipe(Effect.catch(ciCommandFailure))
    }),
    deleteSecret: Effect.fn(function*({ params }) {
      const repo = yield* repository(params, "write")
      yield* gateway.deleteSecret(repositoryKey(repo.owner, repo.name), { name: params.secret, actor: yield* actorName }, yield* commandRequest).pipe(
        Effect.catch(ciCommandFailure)
      )
    })
  })
}))

