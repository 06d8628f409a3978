/**
 * Following a run's log while it runs: the one copy of that logic, used by the API's server-sent
 * events (`CiLogRoutes`) and by the run page's (`CiPages`), which only encode the events differently.
 * A follower is woken by the run's appends and reports (`CiLogStore.ticket`), on any node; it reads the
 * database and the object store only, so any node serves it, whichever node runs the steps.
 */
import { Effect, Option, Stream } from "effect"
import { CiLogStore } from "./CiLogStore.ts"
import type { CiRunRecord, StepState } from "./CiRecord.ts"
import { CiRuns } from "./CiRuns.ts"

/** The ticket is the wake-up; this is only its safety net. */
const SAFETY_POLL = "500 millis"
const KEEPALIVE_MS = 15_000

export interface StepEvent {
  readonly step_id: number
  readonly job: string
  readonly name: string
  readonly status: StepState["status"]
  readonly conclusion: StepState["conclusion"]
  readonly exit_code: number | null
}

export type FollowEvent =
  /** A piece of a step's output; `id` increases in write order across the run. */
  | { readonly _tag: "Log"; readonly id: number; readonly stepId: number; readonly job: string | null; readonly text: string }
  /** A step's state changed (every step once at the start). */
  | { readonly _tag: "Step"; readonly step: StepEvent }
  /** The run completed (or was deleted): the last event. */
  | { readonly _tag: "End"; readonly status: string; readonly conclusion?: string | null; readonly error?: string | null }
  /** Nothing happened for a while: keeps proxies from closing the connection. */
  | { readonly _tag: "Keepalive" }

/** One server-sent event. */
export const sse = (event: string, data: unknown, id?: number) => `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

const stepsOf = (run: CiRunRecord) =>
  new Map(run.jobs.flatMap((job) => job.steps.map((step) => [step.id, { job: job.key, step }] as const)))

const stepEvent = (job: string, step: StepState): StepEvent => ({
  step_id: step.id,
  job,
  name: step.name,
  status: step.status,
  conclusion: step.conclusion,
  exit_code: step.exit_code
})

interface State {
  readonly lastId: number
  readonly seen: ReadonlyMap<number, string>
  readonly lastSent: number
  /** The ticket taken before the last read: the next change after it (undefined before the first read). */
  readonly changed: Effect.Effect<void> | undefined
}

/**
 * The run's events from the log piece after `afterId` (0: from the start) until it completes, as a
 * response body needs it (no requirements left). The caller has already found the run in `repo`.
 */
export const followRun = (repo: { readonly id: string; readonly orgId: string }, runId: number, afterId = 0) =>
  Effect.gen(function*() {
    const runs = yield* CiRuns
    const store = yield* CiLogStore
    const poll = (state: State): Effect.Effect<readonly [ReadonlyArray<FollowEvent>, Option.Option<State>]> =>
      Effect.gen(function*() {
        if (state.changed !== undefined) yield* state.changed.pipe(Effect.timeoutOption(SAFETY_POLL))
        const changed = store.ticket(runId)
        // The run's state is read before the pieces: once it says completed, the pieces read after it are all there are.
        const run = yield* runs.get(repo.id, runId).pipe(Effect.orElseSucceed(() => undefined))
        if (run === undefined) return [[{ _tag: "End", status: "deleted" }], Option.none()] as const
        const pieces = yield* store.after(repo.orgId, runId, state.lastId).pipe(Effect.orElseSucceed(() => []))
        const out: Array<FollowEvent> = []
        const steps = stepsOf(run)
        const seen = new Map(state.seen)
        // Steps that started are announced before their output; those that ended, after it.
        for (const piece of pieces) {
          const owner = steps.get(piece.stepId)
          if (owner !== undefined && !seen.has(piece.stepId)) {
            seen.set(piece.stepId, "running:null:null")
            out.push({ _tag: "Step", step: { ...stepEvent(owner.job, owner.step), status: "running", conclusion: null, exit_code: null } })
          }
          out.push({ _tag: "Log", id: piece.id, stepId: piece.stepId, job: owner?.job ?? null, text: piece.text })
        }
        for (const [id, { job, step }] of steps) {
          const key = `${step.status}:${step.conclusion}:${step.exit_code}`
          if (seen.get(id) !== key) {
            seen.set(id, key)
            out.push({ _tag: "Step", step: stepEvent(job, step) })
          }
        }
        const lastId = pieces.length === 0 ? state.lastId : pieces[pieces.length - 1]!.id
        if (run.status === "completed" && pieces.length < 1000) {
          out.push({ _tag: "End", status: run.status, conclusion: run.conclusion, error: run.error })
          return [out, Option.none()] as const
        }
        const now = Date.now()
        if (out.length === 0 && now - state.lastSent > KEEPALIVE_MS) out.push({ _tag: "Keepalive" })
        return [out, Option.some({ lastId, seen, lastSent: out.length > 0 ? now : state.lastSent, changed })] as const
      })
    return Stream.paginate<State, FollowEvent>({ lastId: afterId, seen: new Map(), lastSent: Date.now(), changed: undefined }, poll)
  })

/** The headers of a server-sent events response: never stored, never buffered by a proxy. */
export const sseHeaders = { "cache-control": "no-store", "x-accel-buffering": "no" }
