/**
 * `GET /api/{owner}/{name}/ci/runs/{id}/logs`: a run's logs as text, step by step; with
 * `?follow=1` (or `Accept: text/event-stream`) a live stream of server-sent events until the run
 * completes: `log` (a piece of a step's output), `step` (a step's state changed) and finally
 * `end` (the run's status and conclusion). It reads the database and the object store only, so
 * any node serves it, whichever node runs the steps.
 */
import { ApiCi, ApiErrors, ApiParams } from "@grove/api"
import { Effect, Layer, Option, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { dbUnavailable } from "../http/Failures.ts"
import { routeParams } from "../http/PathParams.ts"
import { answer, routeRepository } from "../http/RawRoutes.ts"
import { CiLogStore } from "./CiLogStore.ts"
import type { CiRunRecord, StepState } from "./CiRecord.ts"
import { CiRuns } from "./CiRuns.ts"

const logParams = routeParams({ ...ApiParams.OwnerRepo, id: ApiCi.RunId })
/** A follower is woken by the run's appends and reports (CiLogStore.ticket); this is only its safety net. */
const SAFETY_POLL = "500 millis"
const KEEPALIVE_MS = 15_000

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

const stepsOf = (run: CiRunRecord) =>
  new Map(run.jobs.flatMap((job) => job.steps.map((step) => [step.id, { job: job.key, step }] as const)))

const stepEvent = (job: string, step: StepState) => ({
  step_id: step.id,
  job,
  name: step.name,
  status: step.status,
  conclusion: step.conclusion,
  exit_code: step.exit_code
})

const logs = HttpRouter.add("GET", "/api/:owner/:name/ci/runs/:id/logs", answer(Effect.gen(function*() {
  yield* logParams
  const { repo, params } = yield* routeRepository("read")
  const runs = yield* CiRuns
  const store = yield* CiLogStore
  const request = yield* HttpServerRequest.HttpServerRequest
  const runId = Number(params.id)
  const first = yield* dbUnavailable(runs.get(repo.id, runId))
  if (first === undefined) return yield* new ApiErrors.NotFound({ error: `CI run ${params.id} not found`, code: "not_found" })
  const url = new URL(request.url, "http://grove")
  const follow = url.searchParams.get("follow") === "1" || url.searchParams.get("follow") === "true" ||
    (request.headers["accept"] ?? "").includes("text/event-stream")
  const unavailable = () => new ApiErrors.ServiceUnavailable({ error: "the run's logs could not be read; try again", code: "unavailable", retryable: true })

  if (!follow) {
    const byStep = yield* store.byStep(repo.orgId, runId).pipe(Effect.mapError(unavailable))
    const text = first.jobs.flatMap((job) =>
      job.steps.map((step) => `== ${job.name} / ${step.name} (${step.conclusion ?? step.status}${step.exit_code === null ? "" : `, exit ${step.exit_code}`})\n${byStep.get(step.id) ?? ""}`)
    ).join("\n")
    return HttpServerResponse.text(first.error === null ? text : `${text}\n[grove: ${first.error}]\n`, { contentType: "text/plain; charset=utf-8" })
  }

  interface State {
    readonly lastId: number
    readonly seen: ReadonlyMap<number, string>
    readonly lastSent: number
    /** The ticket taken before the last read: the next change after it (undefined before the first read). */
    readonly changed: Effect.Effect<void> | undefined
  }
  const poll = (state: State): Effect.Effect<readonly [ReadonlyArray<string>, Option.Option<State>]> =>
    Effect.gen(function*() {
      if (state.changed !== undefined) yield* state.changed.pipe(Effect.timeoutOption(SAFETY_POLL))
      const changed = store.ticket(runId)
      // The run's state is read before the pieces: once it says completed, the pieces read after it are all there are.
      const run = yield* runs.get(repo.id, runId).pipe(Effect.orElseSucceed(() => undefined))
      if (run === undefined) return [[sse("end", { status: "deleted" })], Option.none()] as const
      const pieces = yield* store.after(repo.orgId, runId, state.lastId).pipe(Effect.orElseSucceed(() => []))
      const out: Array<string> = []
      const steps = stepsOf(run)
      const seen = new Map(state.seen)
      const announce = () => {
        for (const [id, { job, step }] of steps) {
          const key = `${step.status}:${step.conclusion}:${step.exit_code}`
          if (seen.get(id) !== key) {
            seen.set(id, key)
            out.push(sse("step", stepEvent(job, step)))
          }
        }
      }
      // Steps that started are announced before their output; those that ended, after it.
      for (const piece of pieces) {
        const owner = steps.get(piece.stepId)
        if (owner !== undefined && !seen.has(piece.stepId)) {
          seen.set(piece.stepId, "running:null:null")
          out.push(sse("step", { ...stepEvent(owner.job, owner.step), status: "running", conclusion: null, exit_code: null }))
        }
        out.push(sse("log", { step_id: piece.stepId, job: owner?.job ?? null, text: piece.text }))
      }
      announce()
      const lastId = pieces.length === 0 ? state.lastId : pieces[pieces.length - 1]!.id
      if (run.status === "completed" && pieces.length < 1000) {
        out.push(sse("end", { status: run.status, conclusion: run.conclusion, error: run.error }))
        return [out, Option.none()] as const
      }
      const now = Date.now()
      if (out.length === 0 && now - state.lastSent > KEEPALIVE_MS) out.push(": keepalive\n\n")
      return [out, Option.some({ lastId, seen, lastSent: out.length > 0 ? now : state.lastSent, changed })] as const
    })
  const body = Stream.paginate<State, string>({ lastId: 0, seen: new Map(), lastSent: Date.now(), changed: undefined }, poll).pipe(Stream.encodeText)
  return HttpServerResponse.stream(body, {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
  })
})))

export const CiLogRoutes = Layer.mergeAll(logs)
