/**
 * Executes one run on this node: jobs in `needs` order (independent jobs at once), each in a
 * fresh checkout of the run's commit owned by a host user of the job's own, each step in its own
 * sandbox (Sandbox; a network-on job's first step in one started ahead, WarmSandboxes, whose
 * user and directory become the job's) in a pseudo-terminal (StepProcess) with the workflow's environment and the
 * repository's secrets. Output is masked, capped per step and
 * written to the log store as it comes (what arrives while a piece is stored goes in the next one). Every transition of a job or step
 * is reported to the CiRun entity, batched where nothing happens between two of them (a job's start with its first
 * step's, a short step's start with the next report, the last job's end with the run's Finish). The runner's heartbeat is its own row (CiHeartbeats, every 2 s, straight to
 * the database); the beat also tells it when the run was cancelled, which interrupts the jobs (killing their
 * process groups).
 */
import type { Workflow, WorkflowJob, WorkflowStep } from "@grove/core/ci/Workflow"
import { makeMasker } from "@grove/core/ci/LogMask"
import { Cause, Effect, Exit, Fiber, Option, Queue, Scope, Semaphore } from "effect"
import type { CiConfig } from "../Config.ts"
import * as CiCache from "./CiCache.ts"
import type { CiHeartbeats } from "./CiHeartbeats.ts"
import { CiGateway } from "./CiGateway.ts"
import { CiLogStore } from "./CiLogStore.ts"
import { outcomeUnknown } from "./CiOutcome.ts"
import { type Conclusion, type JobState, runKey, type StepState } from "./CiRecord.ts"
import { CiRuns, type RunnableRun } from "./CiRuns.ts"
import { type Isolation, jobUser, releaseUser, type RunUser, stepCommand, warmStepLine } from "./Sandbox.ts"
import { RUNNER_LANG, stepEnvironment } from "./StepEnvironment.ts"
import { guarded } from "./NetnsPool.ts"
import { type PreparedStep, runStep } from "./StepProcess.ts"
import type { WarmSandboxes } from "./WarmSandboxes.ts"
import { checkout, remove } from "./Workspace.ts"

export interface RunnerContext {
  readonly node: string
  readonly config: CiConfig
  readonly isolation: Isolation
  /** This node's runner heartbeats. */
  readonly beats: CiHeartbeats
  /** Sandboxes started ahead, for jobs with the network on. */
  readonly warm?: WarmSandboxes | undefined
  /** Where the jobs' cleanups run after their run's Finish: the node's stop waits for them. */
  readonly cleanups: Scope.Scope
}

/**
 * Runs the jobs' cleanups one after another in their own fiber in `scope`, uninterruptible, so closing the scope
 * waits for them (each is bounded: a removal, pasta's teardown killed after 5 s). Each on its own: one that
 * fails or dies is logged and the next still runs (its checkout and host user would stay taken otherwise).
 */
export const cleanUpAfter = (cleanups: ReadonlyArray<Effect.Effect<void>>, scope: Scope.Scope) =>
  Effect.forEach(cleanups, (cleanup) =>
    Effect.exit(cleanup).pipe(
      Effect.flatMap((exit) => Exit.isFailure(exit) ? Effect.logWarning("a CI job's cleanup failed", Cause.squash(exit.cause)) : Effect.void)
    ), { discard: true }).pipe(
      Effect.forkIn(scope, { uninterruptible: true }),
      Effect.asVoid
    )

/** What a step sees besides the workflow's env and the secrets: none of the server's own variables. */
const baseEnv = (dir: string): Record<string, string> => ({
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: dir,
  LANG: RUNNER_LANG,
  TERM: "xterm",
  CI: "true"
})

const groveEnv = (run: RunnableRun, job: WorkflowJob, dir: string): Record<string, string> => ({
  GROVE_CI: "true",
  GROVE_RUN_ID: String(run.id),
  GROVE_REPOSITORY: `${run.owner}/${run.repoName}`,
  GROVE_BRANCH: run.branch,
  GROVE_COMMIT: run.commitHash,
  GROVE_EVENT: run.event,
  GROVE_WORKFLOW: run.workflowName,
  GROVE_JOB: job.id,
  GROVE_WORKSPACE: dir
})

/** A step that still runs after this long is reported running (a shorter one's start is told with its end). */
const REPORT_RUNNING_AFTER = "200 millis"

const minutes = (value: number) => Math.round(value * 60_000)
const formatDuration = (ms: number) => ms >= 60_000 ? `${+(ms / 60_000).toFixed(2)} min` : `${+(ms / 1000).toFixed(1)} s`

/** Runs the run; answers whether its row is known to have left `running` on this node (false: its Finish is pending or lost). */
export const executeRun = Effect.fnUntraced(function*(context: RunnerContext, runId: number, repoKey: string) {
  const runs = yield* CiRuns
  const gateway = yield* CiGateway
  const logStore = yield* CiLogStore
  const entityId = runKey(repoKey, runId)
  const node = context.node
  // The runner's heartbeat, from now until the run is recorded as finished (the scope's end).
  yield* context.beats.track(runId).pipe(Effect.orDie)
  const loaded = yield* runs.runnable(runId).pipe(Effect.orElseSucceed(() => undefined))
  if (loaded === undefined) {
    return yield* gateway.finish(entityId, { node, jobs: "[]", conclusion: "failure", error: "the run's workflow could not be read" }).pipe(
      Effect.as(true),
      Effect.orElseSucceed(() => false)
    )
  }
  // Only a run recorded as running on this node is run here: never a completed one, nor another node's.
  if (loaded.status !== "running" || loaded.runnerNode !== node) {
    yield* Effect.logWarning(`CI run ${runId} is ${loaded.status} on ${loaded.runnerNode ?? "no node"}, not running on this node; not run`)
    return true
  }
  const run: RunnableRun = loaded
  const workflow: Workflow = run.workflow
  const secrets = run.secrets
  let jobs: Array<JobState> = run.jobs.map((job) => ({ ...job, steps: [...job.steps] }))
  const now = () => new Date().toISOString()
  const setJob = (key: string, patch: Partial<JobState>) => {
    jobs = jobs.map((job) => job.key === key ? { ...job, ...patch } : job)
  }
  const setStep = (id: number, patch: Partial<StepState>) => {
    jobs = jobs.map((job) => ({ ...job, steps: job.steps.map((step) => step.id === id ? { ...step, ...patch } : step) }))
  }
  const reporting = yield* Semaphore.make(1)
  let cancelled = false
  // Each job's end: its checkout removed, then its scope closed (sandbox, host user, base). Done once the
  // run's Finish is sent, off the way to it and to the runner's next run (an ending run, a node stopping too, still cleans up).
  const cleanups: Array<Effect.Effect<void>> = []
  yield* Effect.addFinalizer(() => cleanUpAfter(cleanups, context.cleanups))
  /** Reports the jobs; answers false when the run was cancelled (or failed) meanwhile. */
  const report = reporting.withPermits(1)(
    Effect.suspend(() => gateway.progress(entityId, { node, jobs: JSON.stringify(jobs) })).pipe(
      // The log's followers show the steps' states: wake them.
      Effect.tap(() => logStore.notify(run.id)),
      Effect.map((state) => state.status !== "completed"),
      Effect.catch((error) => Effect.succeed(error._tag !== "CiRunStateInvalid"))
    )
  )

  const stepLog = (stepId: number) =>
    Effect.gen(function*() {
      const masker = makeMasker(secrets.values())
      let buffer = ""
      let bytes = 0
      let truncated = false
      let seq = 0
      const add = (text: string) => {
        if (truncated || text.length === 0) return
        const size = Buffer.byteLength(text)
        if (bytes + size <= context.config.stepOutputLimitBytes) {
          buffer += text
          bytes += size
          return
        }
        const room = Buffer.from(text).subarray(0, Math.max(0, context.config.stepOutputLimitBytes - bytes)).toString("utf8")
        buffer += `${room}\n[grove: output truncated: this step printed more than ${context.config.stepOutputLimitBytes} bytes; the rest was discarded]\n`
        truncated = true
      }
      // Uninterruptible: a piece taken from the buffer is stored even when the flusher is stopped meanwhile.
      const flush = Effect.uninterruptible(Effect.suspend(() => {
        if (buffer.length === 0) return Effect.void
        const piece = buffer
        buffer = ""
        return logStore.append(run.orgId, run.id, stepId, seq++, piece).pipe(
          Effect.catchCause((cause) => Effect.logWarning("a CI log piece could not be stored", Cause.squash(cause)))
        )
      }))
      // Pushed, not polled: a write wakes the flusher.
      const written = yield* Queue.dropping<void>(1)
      const flusher = yield* Effect.forkDetach(Effect.forever(Effect.andThen(Queue.take(written), flush)))
      return {
        write: (text: string) => {
          add(masker.push(text))
          Queue.offerUnsafe(written, undefined)
        },
        close: Effect.gen(function*() {
          yield* Fiber.interrupt(flusher)
          add(masker.end())
          yield* flush
        })
      }
    })

  const runSteps = (job: WorkflowJob, state: JobState, dir: string, user: RunUser | undefined, deadline: number, warm: PreparedStep | undefined) =>
    Effect.gen(function*() {
      let outcome: Conclusion = "success"
      for (let i = 0; i < job.steps.length; i++) {
        const step: WorkflowStep = job.steps[i]!
        const id = state.steps[i]!.id
        if (outcome !== "success") {
          setStep(id, { status: "completed", conclusion: "skipped" })
          continue
        }
        setStep(id, { status: "running", started_at: now() })
        // Reported only once the step has run for a moment: a short step's start goes with the next report (its
        // end's, the job's or the run's Finish), one command instead of two. A report under way is not cut off.
        const told = yield* Effect.forkChild(Effect.andThen(Effect.sleep(REPORT_RUNNING_AFTER), Effect.uninterruptible(report)))
        const log = yield* stepLog(id)
        const jobLeft = deadline - Date.now()
        const stepLimit = step.timeoutMinutes === undefined ? Infinity : minutes(step.timeoutMinutes)
        const limit = Math.min(stepLimit, jobLeft)
        // Decided before the step runs: which of the two limits would end it.
        const which = stepLimit < jobLeft ? "step" : "job"
        // With the terminal's own variables as a pty gives them.
        const env = { ...baseEnv(dir), ...Object.fromEntries(secrets), ...workflow.env, ...job.env, ...step.env, ...groveEnv(run, job, dir), PWD: dir, TERM: "xterm" }
        // The first step runs in the job's warm sandbox, if it has one still waiting.
        // A stored run from before `network` existed has none: on, as then.
        const started = i === 0 && warm !== undefined && warm.waiting()
          ? warm.run(warmStepLine(env, dir, step.run), log.write)
          : Effect.flatMap(guarded(stepCommand(context.isolation, user, dir, job.network !== false, step.run, env)), (command) =>
            runStep({ command, cwd: dir, env: stepEnvironment(env), onOutput: log.write }))
        const exit = yield* started.pipe(
          Effect.timeoutOption(Math.max(0, limit)),
          Effect.onInterrupt(() =>
            Effect.gen(function*() {
              yield* Fiber.interrupt(told)
              log.write("\n[grove: the run was cancelled; the step's processes were killed]\n")
              yield* log.close
              setStep(id, { status: "completed", conclusion: "cancelled", finished_at: now() })
            })
          )
        )
        let conclusion: Conclusion
        let code: number | null
        if (Option.isNone(exit)) {
          log.write(`\n[grove: the ${which} timed out after ${formatDuration(limit)}; the step's processes were killed]\n`)
          conclusion = "timed_out"
          code = null
        } else {
          code = exit.value
          conclusion = code === 0 ? "success" : "failure"
        }
        yield* Fiber.interrupt(told)
        yield* log.close
        setStep(id, { status: "completed", conclusion, exit_code: code, finished_at: now() })
        if (conclusion !== "success" && !step.continueOnError) outcome = conclusion
      }
      return outcome
    })

  const runJob = (job: WorkflowJob) =>
    Effect.gen(function*() {
      const state = jobs.find((j) => j.key === job.id)!
      // Reported with its first step's start (one command, not two); a job that cannot start is reported at its end.
      setJob(job.id, { status: "running" })
      const deadline = Date.now() + minutes(job.timeoutMinutes ?? context.config.defaultJobTimeoutMinutes)
      let dir: string | undefined
      // The job's host user is held until its checkout is gone (the scope ends after the removal below).
      const body = Effect.gen(function*() {
        // A sandbox started ahead (network on only): its user and its directory become the job's.
        const warm = job.network !== false && context.warm !== undefined ? yield* context.warm.take : undefined
        if (warm !== undefined) {
          dir = warm.dir
          yield* Effect.addFinalizer(() => Effect.sync(() => (warm.step.discard(), releaseUser(warm.user))))
        }
        const user = warm !== undefined ? warm.user : yield* jobUser(context.isolation)
        dir = yield* checkout(context.config.workDir, `run-${run.id}-${job.id}`, { id: run.repoId, orgId: run.orgId }, run.commitHash, user, warm?.dir)
        const cache = job.cache === undefined ? undefined : { repoId: run.repoId, orgId: run.orgId, branch: run.branch, key: job.cache.key }
        if (cache !== undefined) yield* CiCache.restore(cache, dir, { isolation: context.isolation, user }).pipe(Effect.catchCause(() => Effect.succeed(undefined)))
        const outcome = yield* runSteps(job, state, dir, user, deadline, warm?.step)
        if (outcome === "success" && cache !== undefined && job.cache !== undefined) {
          yield* CiCache.save(cache, job.cache.paths, dir, context.config.workDir, { isolation: context.isolation, user }).pipe(
            Effect.catchCause((cause) => Effect.logWarning("a CI cache could not be saved", Cause.squash(cause)))
          )
        }
        return outcome
      })
      const scope = yield* Scope.make()
      let ended: Exit.Exit<unknown, unknown> = Exit.void
      // Its user is held until its checkout is gone. Listed before the body runs: an interrupted job is cleaned up too.
      cleanups.push(Effect.suspend(() => dir === undefined ? Effect.void : remove(dir)).pipe(Effect.andThen(Effect.suspend(() => Scope.close(scope, ended)))))
      const exit = yield* Effect.exit(Scope.provide(scope)(body))
      ended = exit
      if (Exit.hasInterrupts(exit)) return yield* Effect.interrupt
      const conclusion: Conclusion = Exit.isSuccess(exit) ? exit.value : "failure"
      if (Exit.isFailure(exit)) {
        yield* Effect.logWarning("a CI job could not run", Cause.squash(exit.cause))
        const first = state.steps[0]
        if (first !== undefined) {
          const log = yield* stepLog(first.id)
          log.write(`[grove: the job could not be prepared: ${String(Cause.squash(exit.cause))}]\n`)
          yield* log.close
        }
      }
      for (const step of jobs.find((j) => j.key === job.id)!.steps) {
        if (step.status !== "completed") setStep(step.id, { status: "completed", conclusion: conclusion === "success" ? "skipped" : conclusion })
      }
      setJob(job.id, { status: "completed", conclusion })
      // The last job's end goes with the run's Finish.
      if (jobs.some((j) => j.status !== "completed")) yield* report
      return conclusion
    })

  const runJobs = Effect.gen(function*() {
    const results = new Map<string, Conclusion>()
    const pending = new Map(workflow.jobs.map((job) => [job.id, job]))
    while (pending.size > 0) {
      const ready = [...pending.values()].filter((job) => job.needs.every((need) => results.has(need)))
      if (ready.length === 0) break
      const runnable: Array<WorkflowJob> = []
      for (const job of ready) {
        pending.delete(job.id)
        if (job.needs.every((need) => results.get(need) === "success")) {
          runnable.push(job)
          continue
        }
        // A job whose needs did not all succeed does not run.
        results.set(job.id, "skipped")
        const state = jobs.find((j) => j.key === job.id)!
        for (const step of state.steps) setStep(step.id, { status: "completed", conclusion: "skipped" })
        setJob(job.id, { status: "completed", conclusion: "skipped" })
      }
      const outcomes = yield* Effect.forEach(runnable, (job) => Effect.map(runJob(job), (c) => [job.id, c] as const), { concurrency: "unbounded" })
      for (const [id, conclusion] of outcomes) results.set(id, conclusion)
    }
    const all = [...results.values()]
    return all.includes("timed_out") ? "timed_out" : all.some((c) => c !== "success" && c !== "skipped") ? "failure" : all.every((c) => c === "skipped") ? "skipped" : "success"
  })

  // Started now, not a scheduler turn later (as the dispatcher's launch of the run).
  const main = yield* Effect.forkChild(runJobs, { startImmediately: true })
  // A run completed by someone else (cancel, or failed as lost) stops the jobs: the heartbeat says so.
  const watcher = yield* Effect.forkChild(Effect.forever(Effect.gen(function*() {
    yield* Effect.sleep("1 second")
    if (!context.beats.running(runId)) {
      cancelled = true
      yield* Fiber.interrupt(main)
    }
  })))
  const result = yield* Fiber.await(main).pipe(
    Effect.onInterrupt(() =>
      // This node is shutting down: say so now rather than leaving the run to the sweeper.
      Effect.gen(function*() {
        yield* Fiber.interrupt(main)
        yield* gateway.finish(entityId, { node, jobs: JSON.stringify(jobs), conclusion: "failure", error: `the node running it (${node}) shut down during the run` }).pipe(
          Effect.timeout("3 seconds"),
          Effect.ignore
        )
      })
    )
  )
  yield* Fiber.interrupt(watcher)
  const conclusion: Conclusion = cancelled || Exit.hasInterrupts(result) ? "cancelled" : Exit.isSuccess(result) ? result.value : "failure"
  const error = Exit.isFailure(result) && !Exit.hasInterrupts(result) ? `the runner failed: ${String(Cause.squash(result.cause))}` : null
  const recorded = yield* gateway.finish(entityId, { node, jobs: JSON.stringify(jobs), conclusion, error }).pipe(
    Effect.retry({ times: 5, schedule: undefined }),
    Effect.as(true),
    Effect.catch((error) =>
      outcomeUnknown(error)
        // Sent, not answered in time: it applies later (or the run is failed as lost once its heartbeat is stale).
        ? Effect.as(Effect.logInfo(`CI run ${run.id}'s Finish is pending (no answer in time); it is recorded when it applies`), false)
        : Effect.as(Effect.logWarning(`CI run ${run.id} could not be recorded as finished`, error), false)
    ),
    Effect.catchCause((cause) => Effect.as(Effect.logWarning(`CI run ${run.id} could not be recorded as finished`, Cause.squash(cause)), false))
  )
  yield* logStore.notify(run.id)
  return recorded
}, Effect.scoped)
