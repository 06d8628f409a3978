/**
 * This node's share of CI: a pool of `ci.concurrency` runners that claim queued runs (a `Start`
 * command to the run's entity: of several nodes racing for a run, one wins the compare-and-set),
 * woken by `ci.run.queued` events and a one-second poll; and a sweeper that fails runs whose
 * runner stopped beating (a killed node) within ~20 s, so no run stays `running` forever. A runner's
 * liveness is its own heartbeat row (CiHeartbeats), written by this node straight to the database, never
 * a command through the run's partition: a partition unserved for minutes does not make a live runner lost.
 * Runners start only when a step sandbox works here (Sandbox.probe), or when the operator chose the
 * unsandboxed shared runner (`--ci-unsafe-shared-runner`): then it says so at every start. The steps' terminals come
 * from this node's PtySpawner (provided here: its helper ends after the runs and the warm sandboxes).
 */
import { Bus, MetricHandles, Topics } from "@grove/bus"
import { Cause, Effect, Exit, Layer, Metric, Scope } from "effect"
import * as path from "node:path"
import { type CiConfig, ServerConfig, DEFAULT_CI } from "../Config.ts"
import { repositoryEventOf } from "../events/RepositoryEvent.ts"
import { CiGateway } from "./CiGateway.ts"
import * as CiHeartbeats from "./CiHeartbeats.ts"
import { FOLLOW_MARGIN_MS, outcomeUnknown } from "./CiOutcome.ts"
import { runKey } from "./CiRecord.ts"
import { CiRuns } from "./CiRuns.ts"
import { CiWake } from "./CiWake.ts"
import * as NetnsPool from "./NetnsPool.ts"
import { PtySpawner } from "./PtySpawner.ts"
import * as RunClaims from "./RunClaims.ts"
import { executeRun, type RunnerContext } from "./Runner.ts"
import { type Isolation, probe, sharedRunner } from "./Sandbox.ts"
import * as WarmSandboxes from "./WarmSandboxes.ts"
import { prepareRoot, remove } from "./Workspace.ts"

/** A running run whose runner has not beaten for this long is taken for lost (it beats every 2 s). */
export const STALE_AFTER_MS = 15_000
const SWEEP_EVERY = "5 seconds"
const WARM_MAX = 4
/** Queued runs a look for them takes beyond this node's free runners. */
const LOOK_AHEAD = 8
/** How long those are tried before a runner looks again. */
const SEEN_FOR_MS = 1_000

const runnerSlots = Metric.gauge("grove_ci_runner_slots", { description: "CI runs this node may run at once (0: no runners on this node)" })
const runnerSlotsBusy = Metric.gauge("grove_ci_runner_slots_busy", { description: "CI runs running on this node now" })

export const CiDispatcherLive = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* ServerConfig
  const runs = yield* CiRuns
  const gateway = yield* CiGateway
  const bus = yield* Bus.Bus
  const ci = config.ci ?? { ...DEFAULT_CI, workDir: `${config.dataDir}/ci` }
  // Network namespaces kept across steps (NetnsPool): one per runner and per warm sandbox, and one spare.
  const isolation = yield* isolationFor(ci).pipe(Effect.flatMap((found) => NetnsPool.pooled(found, ci.concurrency + Math.min(ci.concurrency, WARM_MAX) + 1)))
  // This node's own directory under the work root: what a previous run of the same node left
  // behind (it was killed mid-run) is removed, other nodes' directories are not touched.
  const root = path.join(ci.workDir, config.nodeId.replace(/[^A-Za-z0-9._-]/g, "_"))
  yield* prepareRoot(ci.workDir)
  yield* remove(root)
  yield* prepareRoot(root)
  // Stopped normally: nothing of this node is left under the work root (the runs' own directories went with them).
  yield* Effect.addFinalizer(() => remove(root))
  const beats = yield* CiHeartbeats.make(config.nodeId)
  const spawner = yield* PtySpawner
  // Sandboxes started ahead: one per runner, at most WARM_MAX (each waiting one holds ~38 MB of the host's
  // memory, pasta's ~31 MB of it), from this node's first network-on job on; none for the unsandboxed shared runner.
  const warm = isolation?._tag === "Sandboxed" ? yield* WarmSandboxes.make(isolation, root, Math.min(ci.concurrency, WARM_MAX), spawner) : undefined
  // The jobs' cleanups (Runner's cleanUpAfter): closed after the runs stopped, before the warm sandboxes and the root go, waiting for them.
  const cleanups = yield* Effect.scope.pipe(Effect.flatMap((scope) => Scope.fork(scope, "parallel")))
  const context: RunnerContext | undefined = isolation === undefined ? undefined : { node: config.nodeId, config: { ...ci, workDir: root }, isolation, beats, warm, cleanups }
  const services = yield* Effect.context<Effect.Services<ReturnType<typeof executeRun>>>()
  const wake = yield* CiWake
  let active = 0
  runnerSlotsBusy.updateUnsafe(0, MetricHandles.DEFAULT_CONTEXT)
  const busy = (change: number) => {
    // A runner taken: its helper starts now (once), while the run is queued or claimed and checked out, not at its first step.
    if (change > 0) spawner.start()
    active += change
    runnerSlotsBusy.updateUnsafe(active, MetricHandles.DEFAULT_CONTEXT)
  }

  // Runs this node claimed lately: their `ci.run.queued` event, which comes back through the outbox after the
  // claim, wakes nobody (each wake is a query for queued runs).
  const claimedLately = new Set<number>()
  // Whether queued runs may wait that this node had no free runner for: a runner that ends then claims again
  // at once (otherwise the one-second poll, and the next queued event, find them).
  let backlog = false

  yield* bus.tail(Topics.events, (record) => {
    // A branch's new head, for the manual starts' plans (CiWake.head); a merge's commit is main's.
    const moved = repositoryEventOf(record.value)
    if (moved?.branch !== undefined && moved.commit !== undefined) wake.sawHead(moved.repository_id, moved.type === "merge" ? "main" : moved.branch, moved.commit)
    const event = record.value as { type?: unknown; run_id?: unknown } | null
    return event?.type === "ci.run.queued" && !claimedLately.has(Number(event.run_id)) ? wake.wake : Effect.void
  }).pipe(Effect.catch((error) => Effect.logWarning("not following CI events; queued runs are picked up by polling", error)))

  const scope = yield* Effect.scope
  // Runs whose Start is followed here, and runs executed here: one Start of a run at a time, one execution.
  const claims = RunClaims.make()
  /** Whether the run's row says it runs on this node (a read that failed: taken for yes). */
  const runningHere = (runId: number) =>
    runs.claimOf(runId).pipe(
      Effect.map((run) => run !== undefined && run.status === "running" && run.runnerNode === config.nodeId),
      Effect.orElseSucceed(() => true)
    )
  /** Forgets an executed run once its row left `running` here (its Finish was pending, or is lost: the sweeper fails it). */
  const forgetOnceLeft = (runId: number) =>
    Effect.gen(function*() {
      while (yield* runningHere(runId)) yield* Effect.sleep("1 second")
    }).pipe(Effect.ensuring(Effect.sync(() => claims.left(runId))))
  /** Gives back a runner counted busy that runs nothing. */
  const release = Effect.suspend(() => {
    busy(-1)
    return backlog ? wake.wake : Effect.void
  })
  /** Runs a started run in a runner already counted busy; the runner is free again at its end. */
  const launch = (context: RunnerContext, runId: number, repoKey: string) =>
    Effect.suspend(() => {
      if (!claims.execute(runId)) return Effect.logWarning(`CI run ${runId} already ran on this node; not run again`).pipe(Effect.andThen(release))
      claimedLately.add(runId)
      if (claimedLately.size > 1024) claimedLately.delete(claimedLately.values().next().value!)
      return executeRun(context, runId, repoKey).pipe(
        Effect.catchCause((cause) => Effect.logWarning(`CI run ${runId} failed in its runner`, Cause.squash(cause)).pipe(Effect.as(false))),
        // Its Finish not recorded (pending): the row may still say running here, so it is not run again until it left.
        // Interrupted: this node is stopping.
        Effect.onExit((exit) =>
          Exit.isFailure(exit) && !Exit.hasInterrupts(exit) || Exit.isSuccess(exit) && !exit.value
            ? Effect.forkIn(forgetOnceLeft(runId), scope)
            : Effect.sync(() => claims.left(runId))
        ),
        Effect.ensuring(release),
        Effect.provideContext(services),
        // Started now, not a scheduler turn later: on a busy server each turn waited 5-20 ms for the event loop.
        Effect.forkIn(scope, { startImmediately: true }),
        Effect.asVoid
      )
    })
  /** For a runner counted busy whose command's answer did not come: runs the run `outcome` names, or frees the runner. */
  const follow = (context: RunnerContext, outcome: Effect.Effect<number | undefined>, repoKey: string) =>
    outcome.pipe(
      Effect.flatMap((runId) => runId === undefined ? release : launch(context, runId, repoKey)),
      Effect.forkIn(scope),
      Effect.asVoid
    )
  // The API's handlers start runs here directly when a runner is free (CiWake, CiQueueCommand's `startOn`).
  if (context !== undefined) {
    wake.attach({
      node: config.nodeId,
      reserve: () => {
        if (active >= ci.concurrency) return false
        busy(1)
        return true
      },
      release,
      run: (runId, repoKey) => launch(context, runId, repoKey),
      follow: (outcome, repoKey) => follow(context, outcome, repoKey)
    })
  }
  // Shown once the handlers can reserve this node's runners.
  runnerSlots.updateUnsafe(context === undefined ? 0 : ci.concurrency, MetricHandles.DEFAULT_CONTEXT)

  /**
   * Whether this node's Start of a queued run applied, for a Start whose answer did not come: read from the run's
   * row (no command id to look up, so the Start is sent as a fresh command, with no inbox row written ahead).
   * Still queued after `until` (and the margin for the nodes' clocks), the Start can no longer apply.
   */
  const claimed = (runId: number, until: number): Effect.Effect<boolean> =>
    Effect.gen(function*() {
      while (true) {
        // A read that failed is retried like a run still queued.
        const run = yield* runs.claimOf(runId).pipe(Effect.orElseSucceed(() => ({ status: "queued", runnerNode: null })))
        if (run === undefined) return false
        if (run.status !== "queued") return run.status === "running" && run.runnerNode === config.nodeId
        if (Date.now() > until + FOLLOW_MARGIN_MS) return false
        yield* Effect.sleep("500 millis")
      }
    })

  /**
   * Claims one queued run for a runner of this node (counted busy first): runs it when its Start answers, and
   * when the answer did not come in time (the Start may still apply) follows the run's row, so a run recorded
   * as started here always gets its runner; a Start applied after `until` starts nothing. Answers whether the
   * runner was kept for it.
   */
  const claimOne = (context: RunnerContext, candidate: { readonly id: number; readonly repoKey: string }) =>
    Effect.suspend(() => {
      // A Start of it already followed here: no second one (it would hold a second runner and could run it twice).
      if (!claims.follow(candidate.id)) return Effect.succeed(false)
      busy(1)
      const until = Date.now() + config.commandTimeoutMs + FOLLOW_MARGIN_MS
      const settled = Effect.sync(() => claims.settled(candidate.id))
      return gateway.start(runKey(candidate.repoKey, candidate.id), { node: config.nodeId, until }).pipe(
        Effect.matchEffect({
          onSuccess: () => Effect.as(Effect.andThen(settled, launch(context, candidate.id, candidate.repoKey)), true),
          onFailure: (error) =>
            outcomeUnknown(error)
              ? Effect.as(
                follow(
                  context,
                  Effect.map(claimed(candidate.id, until), (mine) => mine ? candidate.id : undefined).pipe(Effect.ensuring(settled)),
                  candidate.repoKey
                ),
                true
              )
              : Effect.as(Effect.andThen(settled, release), false)
        }),
        Effect.uninterruptible
      )
    })

  // Queued runs the last look found beyond the free runners, and when: a runner that frees up soon after
  // claims the next of them without looking again (a Start of one another node took or that was cancelled
  // meanwhile is refused, and the next is tried).
  let seen: Array<{ readonly id: number; readonly repoKey: string }> = []
  let seenAt = 0
  // More queued runs may wait than the last look returned.
  let more = false
  const claim = Effect.gen(function*() {
    if (context === undefined) return
    // Whether this round looked, and how many of that look's runs it claimed.
    let looked = false
    let claimedFromLook = 0
    while (active < ci.concurrency) {
      if (seen.length === 0 || Date.now() - seenAt > SEEN_FOR_MS) {
        // This round's look found only runs taken elsewhere, or all there were: the next wake or poll looks again.
        if (looked && (claimedFromLook === 0 || !more)) break
        const limit = ci.concurrency - active + LOOK_AHEAD
        const found = yield* runs.queued(limit)
        // Not the runs whose Start is followed here (still queued until it applies).
        seen = found.filter((run) => claims.claimable(run.id))
        seenAt = Date.now()
        more = found.length === limit
        looked = true
        claimedFromLook = 0
        if (seen.length === 0) break
      }
      if (yield* claimOne(context, seen.shift()!)) claimedFromLook++
    }
    // Runs may wait that this node had no free runner for: a runner that ends looks again at once.
    backlog = active >= ci.concurrency || seen.length > 0 || more
  })
  yield* Effect.forever(Effect.gen(function*() {
    yield* claim.pipe(Effect.catchCause((cause) => Effect.logWarning("CI dispatch failed; retrying", Cause.squash(cause))))
    yield* Effect.raceFirst(wake.woken, Effect.sleep("1 second"))
  })).pipe(Effect.forkScoped)

  yield* Effect.forever(Effect.gen(function*() {
    yield* Effect.sleep(SWEEP_EVERY)
    const lost = yield* runs.stale(STALE_AFTER_MS)
    for (const run of lost) {
      yield* gateway.failLost(runKey(run.repoKey, run.id), {
        heartbeatAt: run.heartbeatAt.toISOString(),
        reason: `the runner on node ${run.node} stopped reporting (last at ${run.heartbeatAt.toISOString()}); the run did not finish. Start it again.`
      }).pipe(Effect.ignore)
    }
    yield* runs.forgetBeats
  }).pipe(Effect.catchCause((cause) => Effect.logWarning("CI sweep failed", Cause.squash(cause))))).pipe(Effect.forkScoped)
})).pipe(Layer.provide(PtySpawner.layer))

/** The sandbox steps run in; undefined (no runners on this node) when there is none and the operator did not opt out. */
const isolationFor = (ci: CiConfig) =>
  Effect.gen(function*() {
    const found = yield* probe(ci)
    if (found._tag === "Ready") {
      if (ci.unsafeSharedRunner) yield* Effect.logWarning("--ci-unsafe-shared-runner is set, but CI steps are sandboxed (bubblewrap works here)")
      return found.isolation
    }
    if (!ci.unsafeSharedRunner) {
      yield* Effect.logError(
        `CI runners NOT started on this node: steps cannot be isolated (${found.reason}). Install bubblewrap and passt (scripts/setup/system-deps.sh), ` +
          "or pass --ci-unsafe-shared-runner to run steps unsandboxed on the host. Runs stay queued for other nodes."
      )
      return undefined
    }
    const shared: Isolation = yield* sharedRunner(ci)
    yield* Effect.logWarning(
      `UNSAFE: CI steps run unsandboxed on the host (--ci-unsafe-shared-runner; ${found.reason}): they share the host's /proc, /tmp and ` +
        `network${shared._tag === "Shared" && shared.user !== undefined ? ` and the user ${ci.runAsUser}` : ""}, so one run can read another's secrets and files.`
    )
    return shared
  })
