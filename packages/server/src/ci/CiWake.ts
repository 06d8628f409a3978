/**
 * "Runs were queued here": the API's start and trigger handlers tell this node's dispatcher at
 * once, so a free runner claims the run without waiting for the `ci.run.queued` event to come back
 * through the outbox and the bus (which still wakes every node, this one included).
 *
 * And "start it here": a handler that finds a free runner on this node reserves it before it sends
 * the queuing command, which then records the run as started by this node in the same transaction
 * (no Start command, no claim); the handler hands the run to that runner once the command answered.
 */
import { Context, Effect, Layer, Queue } from "effect"

/** This node's runners, as its dispatcher offers them (none until it attached, or when it runs no CI). */
export interface LocalRunners {
  readonly node: string
  /** Takes a free runner (false: none free). */
  readonly reserve: () => boolean
  /** Gives back a reserved runner no run was started for. */
  readonly release: Effect.Effect<void>
  /** Runs `runId`, which the queuing command recorded as started by this node, in a reserved runner. */
  readonly run: (runId: number, repoKey: string) => Effect.Effect<void>
  /**
   * For a reservation whose command's answer did not come (it may still apply): waits, apart from the request,
   * for `outcome`, the run the command started with this reservation (run it) or undefined (give the runner back).
   */
  readonly follow: (outcome: Effect.Effect<number | undefined>, repoKey: string) => Effect.Effect<void>
}

/** Branch heads remembered (the least recently seen goes first). */
const HEADS_KEPT = 4096

export class CiWake extends Context.Service<CiWake, {
  /** Wakes the dispatcher (several wakes before it looks count as one). */
  readonly wake: Effect.Effect<void>
  /** Completes at the next wake. */
  readonly woken: Effect.Effect<void>
  /** Called by the dispatcher once its runners are ready. */
  readonly attach: (runners: LocalRunners) => void
  /** A free runner of this node, reserved: its node id, or undefined (the run is queued for any node). */
  readonly reserve: Effect.Effect<string | undefined>
  readonly release: Effect.Effect<void>
  readonly run: (runId: number, repoKey: string) => Effect.Effect<void>
  readonly follow: (outcome: Effect.Effect<number | undefined>, repoKey: string) => Effect.Effect<void>
  /**
   * The head this node last saw of a repository's (id) branch, from a start's read or a push or merge event: a manual
   * start plans its runs at it without reading the branch, and its command checks it under the branch's lock.
   */
  readonly head: (repoId: string, branch: string) => string | undefined
  readonly sawHead: (repoId: string, branch: string, head: string | undefined) => void
}>()("grove/server/ci/CiWake") {
  static readonly layer = Layer.effect(CiWake, Effect.gen(function*() {
    const queue = yield* Queue.dropping<void>(1)
    let local: LocalRunners | undefined
    const heads = new Map<string, string>()
    return CiWake.of({
      wake: Queue.offer(queue, undefined).pipe(Effect.asVoid),
      woken: Queue.take(queue),
      attach: (runners) => {
        local = runners
      },
      reserve: Effect.sync(() => local !== undefined && local.reserve() ? local.node : undefined),
      release: Effect.suspend(() => local === undefined ? Effect.void : local.release),
      run: (runId, repoKey) => local === undefined ? Effect.void : local.run(runId, repoKey),
      follow: (outcome, repoKey) => local === undefined ? Effect.void : local.follow(outcome, repoKey),
      head: (repoId, branch) => heads.get(`${repoId}\0${branch}`),
      sawHead: (repoId, branch, head) => {
        const key = `${repoId}\0${branch}`
        heads.delete(key)
        if (head === undefined) return
        heads.set(key, head)
        if (heads.size > HEADS_KEPT) heads.delete(heads.keys().next().value!)
      }
    })
  }))
}
