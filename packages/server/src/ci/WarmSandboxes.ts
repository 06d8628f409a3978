/**
 * Sandboxes started ahead of their steps. Starting one (pasta's network namespace, then bwrap) is
 * most of a short step's time, and none of it depends on the run: so this node keeps a few started,
 * each with a host user of its own (Sandbox.reserveUser) and an empty workspace directory bound in,
 * waiting for a step (Sandbox.warmCommand). A job with the network on takes one: its checkout is
 * written into that directory and its first step runs in that sandbox. Each is used once and never
 * handed to another run; a new one is started in its place. The same sandbox as a cold step's: same
 * namespaces, mounts and user; only its PID 1 holds no run's environment.
 *
 * None is started before this node's first take (its first network-on job, which starts its own): a
 * server that never runs CI holds no waiting sandboxes (~38 MB of host memory each).
 */
import { MetricHandles } from "@grove/bus"
import { Cause, Effect, Metric, type Scope } from "effect"
import { lchown, mkdtemp } from "node:fs/promises"
import * as path from "node:path"
import { type Isolation, releaseUser, reserveUser, type RunUser, WARM_READY, warmCommand } from "./Sandbox.ts"
import type { Spawner } from "./PtySpawner.ts"
import { prepareStep, type PreparedStep } from "./StepProcess.ts"
import { RUNNER_LANG } from "./StepEnvironment.ts"
import { remove } from "./Workspace.ts"

export interface Warm {
  /** The host user it runs as; the taker gives it back (Sandbox.releaseUser) when the job ends. */
  readonly user: RunUser | undefined
  /** Its workspace, empty, owned by `user`; the taker removes it. */
  readonly dir: string
  readonly step: PreparedStep
}

export interface WarmSandboxes {
  /**
   * A waiting sandbox now, or undefined when none is (the job starts its own; the first take finds none);
   * another is started meanwhile.
   */
  readonly take: Effect.Effect<Warm | undefined>
}

/** The environment of a waiting sandbox (its PID 1's): no run's. Its shell unsets these names before its step (Sandbox.warmCommand). */
export const WAITING_ENV = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", LANG: RUNNER_LANG }

const waitingGauge = Metric.gauge("grove_ci_sandboxes_waiting", { description: "CI sandboxes started ahead and waiting for a step on this node" })

const discard = (warm: Warm) =>
  Effect.sync(() => {
    warm.step.discard()
    releaseUser(warm.user)
  }).pipe(Effect.andThen(remove(warm.dir)))

/** Keeps `size` sandboxes waiting under `root` from the first take while the scope lasts; they are ended with it. */
export const make = (isolation: Isolation, root: string, size: number, spawner: Spawner): Effect.Effect<WarmSandboxes, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const ready: Array<Warm> = []
    let preparing = 0
    let failures = 0
    let closed = false
    const counted = () => waitingGauge.updateUnsafe(ready.length, MetricHandles.DEFAULT_CONTEXT)
    counted()
    yield* Effect.addFinalizer(() => Effect.suspend(() => {
      closed = true
      const left = ready.splice(0)
      counted()
      return Effect.forEach(left, discard, { discard: true })
    }))

    const prepareOne = Effect.gen(function*() {
      const user = reserveUser(isolation)
      const dir = yield* Effect.promise(() => mkdtemp(path.join(root, "warm-")))
      const started = Effect.gen(function*() {
        if (user !== undefined) yield* Effect.promise(() => lchown(dir, user.uid, user.gid))
        const command = yield* warmCommand(isolation, user, dir)
        return yield* Effect.tryPromise({ try: () => prepareStep(spawner, command, dir, WAITING_ENV, WARM_READY), catch: (cause) => cause })
      })
      const step = yield* started.pipe(Effect.onError(() => Effect.sync(() => releaseUser(user)).pipe(Effect.andThen(remove(dir)))))
      return { user, dir, step }
    })

    // Another failure waits longer (up to 30 s) before the next attempt; jobs start their own meanwhile.
    const fill: Effect.Effect<void> = Effect.suspend(() => {
      if (closed || isolation._tag !== "Sandboxed") return Effect.void
      const wanted = size - ready.length - preparing
      if (wanted <= 0) return Effect.void
      preparing += wanted
      const one = prepareOne.pipe(
        Effect.flatMap((warm) =>
          Effect.suspend(() => {
            failures = 0
            if (closed) return discard(warm)
            ready.push(warm)
            counted()
            return Effect.void
          })
        ),
        Effect.catchCause((cause) =>
          Effect.gen(function*() {
            failures++
            yield* Effect.logWarning("a CI sandbox could not be started ahead; steps start their own", Cause.squash(cause))
            yield* Effect.sleep(Math.min(30_000, 500 * 2 ** Math.min(failures, 6)))
          })
        ),
        Effect.ensuring(Effect.sync(() => preparing--)),
        Effect.andThen(Effect.suspend(() => failures > 0 ? fill : Effect.void))
      )
      return Effect.forEach(Array.from({ length: wanted }), () => Effect.forkIn(one, scope), { discard: true })
    })

    const take: Effect.Effect<Warm | undefined> = Effect.gen(function*() {
      let found: Warm | undefined
      while (found === undefined && ready.length > 0) {
        const next = ready.shift()!
        counted()
        if (next.step.waiting()) found = next
        else yield* discard(next)
      }
      yield* fill
      return found
    })
    return { take }
  })
