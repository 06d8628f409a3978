/**
 * `GET /api/{owner}/{name}/ci/runs/{id}/logs`: a run's logs as text, step by step; with
 * `?follow=1` (or `Accept: text/event-stream`) a live stream of server-sent events until the run
 * completes: `log` (a piece of a step's output), `step` (a step's state changed) and finally
 * `end` (the run's status and conclusion). It reads the database and the object store only, so
 * any node serves it, whichever node runs the steps.
 */
import { ApiCi, ApiErrors, ApiParams } from "@grove/api"
import { Effect, Layer, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { dbUnavailable } from "../http/Failures.ts"
import { routeParams } from "../http/PathParams.ts"
import { answer, routeRepository } from "../http/RawRoutes.ts"
import { CiLogStore } from "./CiLogStore.ts"
import { type FollowEvent, followRun, sse, sseHeaders } from "./CiLogFollow.ts"
import { CiRuns } from "./CiRuns.ts"

const logParams = routeParams({ ...ApiParams.OwnerRepo, id: ApiCi.RunId })

/** The API's encoding of the follow events (unchanged since the API had them). */
const apiEvent = (event: FollowEvent): string => {
  switch (event._tag) {
    case "Log":
      return sse("log", { step_id: event.stepId, job: event.job, text: event.text })
    case "Step":
      return sse("step", event.step)
    case "End": {
      const { _tag: _, ...end } = event
      return sse("end", end)
    }
    case "Keepalive":
      return ": keepalive\n\n"
  }
}

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

  const body = (yield* followRun(repo, runId)).pipe(Stream.map(apiEvent), Stream.encodeText)
  return HttpServerResponse.stream(body, {
    contentType: "text/event-stream",
    headers: sseHeaders
  })
})))

export const CiLogRoutes = Layer.mergeAll(logs)
