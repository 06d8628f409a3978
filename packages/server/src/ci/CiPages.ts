/**
 * The CI pages, at the API's addresses without `/api`:
 * - `{site_url}/{owner}/{name}/ci` the runs, newest first, 30 a page (`?before={id}` the next page,
 *   `?limit=` 1-100 a page, `?branch={name}` one branch's: the branch pages link there);
 * - `/ci/runs/{id}` a run: its jobs and steps, the last 1,000 lines of each step's log (`/steps/{step}/raw`
 *   the whole log as text), and, while it runs, `/ci/runs/{id}/events`: the same follower as the API's
 *   `?follow=1` (CiLogFollow), its lines rendered here (ANSI colours as classes) for the page's script;
 * - Cancel and Re-run post to the API's own endpoints on the user's behalf (web/Forms.ts), so the
 *   API's rules, commands and audit apply; the buttons show to those who may write.
 * Reads go to the same services as the API's (CiRuns, CiLogStore); a hidden repository is the 404 page.
 */
import { ApiErrors } from "@grove/api"
import { Effect, Layer, Option, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Authorizer } from "../access/Authorizer.ts"
import type { RepositoryRecord } from "../access/RepositoryRecord.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { routeRepository } from "../http/RawRoutes.ts"
import { callApi, submittedForm } from "../web/Forms.ts"
import { layout } from "../web/Layout.ts"
import { htmlResponse, pageHeaders, pageRoute } from "../web/Page.ts"
import { html, type Node } from "../web/Render.ts"
import { ciRunsHref, repoCrumbs, repoHeader, repoHref } from "../web/RepoFrame.ts"
import type { PageSession } from "../web/Session.ts"
import { ansiToHtml, type AnsiState, encodeStates, parseStates, PLAIN } from "./CiAnsi.ts"
import { type FollowEvent, followRun, sse, sseHeaders } from "./CiLogFollow.ts"
import { CiLogStore } from "./CiLogStore.ts"
import type { CiRunRecord } from "./CiRecord.ts"
import { CiRuns } from "./CiRuns.ts"
import { jobBlock, runActions, runHref, runsTable, runSummary, stepBadge } from "./CiViews.ts"

const PAGE_SIZE = 30
const MAX_PAGE_SIZE = 100

const badRequest = (error: string) => new ApiErrors.BadRequest({ error, code: "invalid_request" })
const logsUnavailable = () => new ApiErrors.ServiceUnavailable({ error: "the run's logs could not be read; try again", code: "unavailable", retryable: true })

/** A positive integer parameter (a run or step id, a page cursor), else 404 (an address that names nothing). */
const idParam = (value: string | undefined | null) => {
  const id = Number(value)
  return value !== undefined && value !== null && /^[1-9][0-9]{0,15}$/.test(value) && Number.isSafeInteger(id) ? id : undefined
}

const query = Effect.map(HttpServerRequest.HttpServerRequest, (request) => new URL(request.url, "http://x").searchParams)

/** The route's run in the route's repository, for `session`'s caller (a missing or hidden one: 404). */
const routeRun = (session: PageSession) =>
  Effect.gen(function*() {
    const { repo, params } = yield* routeRepository("read", session.caller)
    const id = idParam(params.id)
    const runs = yield* CiRuns
    const run = id === undefined ? undefined : yield* dbUnavailable(runs.get(repo.id, id))
    if (run === undefined) return yield* new ApiErrors.NotFound({ error: `CI run ${params.id ?? ""} not found`, code: "not_found" })
    return { repo, run, params }
  })

/** Whether the signed-in user may write to the repository (start and cancel runs), as the API decides. */
const canWrite = (session: PageSession, repo: RepositoryRecord) =>
  Effect.gen(function*() {
    if (session.user === undefined) return false
    const authorizer = yield* Authorizer
    return yield* authorizer.repository(session.caller, repo.owner, repo.name, "write").pipe(Effect.match({ onFailure: () => false, onSuccess: () => true }))
  })

const runsPage = (session: PageSession) =>
  Effect.gen(function*() {
    const { repo } = yield* routeRepository("read", session.caller)
    const params = yield* query
    const branch = params.get("branch") ?? undefined
    if (branch !== undefined && (branch === "" || branch.length > 255)) return yield* badRequest("branch must be a branch name")
    const cursor = params.get("before")
    const before = cursor === null ? undefined : idParam(cursor)
    if (cursor !== null && before === undefined) return yield* badRequest("before must be a run id")
    const sized = params.get("limit")
    const size = sized === null ? PAGE_SIZE : idParam(sized)
    if (size === undefined || size > MAX_PAGE_SIZE) return yield* badRequest(`limit must be 1-${MAX_PAGE_SIZE}`)
    const runs = yield* CiRuns
    const rows = yield* dbUnavailable(runs.page(repo.id, { branch, before, limit: size + 1 }))
    const shown = rows.slice(0, size)
    const older = rows.length > size ? shown[shown.length - 1]!.id : undefined
    // The next page keeps the filter and the size.
    const filter = `${branch === undefined ? "" : `branch=${encodeURIComponent(branch)}&`}${sized === null ? "" : `limit=${size}&`}`
    return yield* htmlResponse(layout({
      title: `CI${branch === undefined ? "" : ` · ${branch}`} · ${repo.owner}/${repo.name}`,
      session,
      crumbs: repoCrumbs(repo, branch === undefined ? [{ label: "CI" }] : [{ label: "CI", href: ciRunsHref(repo) }, { label: branch }]),
      body: html`${repoHeader(repo, "ci")}
<h2>${branch === undefined ? "CI runs" : html`CI runs of <span class="mono">${branch}</span>`}</h2>
${shown.length === 0 ? html`<p class="muted">No runs${before === undefined ? "" : " before these"}. Workflows live in <code>.oak/workflows/</code>.</p>` : runsTable(repo, shown)}
${before === undefined && older === undefined ? null : html`<nav class="actions" aria-label="Pages">${
        before === undefined ? null : html`<a href=${`${ciRunsHref(repo)}?${filter}`.replace(/[?&]$/, "")}>Newest</a>`
      }${older === undefined ? null : html`<a href=${`${ciRunsHref(repo)}?${filter}before=${older}`}>Older runs</a>`}</nav>`}`
    }))
  })

/** The run page, with a notice (a refused Cancel or Re-run) when a form was just posted. */
const runPage = (session: PageSession, repo: RepositoryRecord, run: CiRunRecord, notice?: { readonly status: number; readonly body: Node }) =>
  Effect.gen(function*() {
    const store = yield* CiLogStore
    // The pieces read here end at `lastId`: the live events continue after it, so no line is shown twice or lost.
    const { byStep, lastId } = yield* store.snapshot(repo.orgId, run.id).pipe(Effect.mapError(logsUnavailable))
    const writer = yield* canWrite(session, repo)
    const live = run.status !== "completed"
    // Where each log ends (a colour open, a sequence cut in half): the live events continue from there.
    const states = live ? encodeStates(new Map([...byStep].map(([step, log]) => [step, ansiToHtml(log).state]))) : undefined
    return yield* htmlResponse(layout({
      title: `${run.workflowName} #${run.id} · ${repo.owner}/${repo.name}`,
      session,
      script: live,
      crumbs: repoCrumbs(repo, [{ label: "CI", href: ciRunsHref(repo) }, { label: `#${run.id}` }]),
      body: html`${repoHeader(repo, "ci")}
${notice?.body ?? null}
<div class="ci-run" data-ci-events=${live ? runHref(repo, run.id, `/events?after=${lastId}${states === undefined ? "" : `&ansi=${encodeURIComponent(states)}`}`) : undefined}>
${runSummary(repo, run)}
${writer ? runActions(session, repo, run) : null}
${run.jobs.length === 0 ? html`<p class="muted">This run has no jobs.</p>` : run.jobs.map((job) => jobBlock(repo, run, job, byStep))}
</div>`
    }), { status: notice?.status ?? 200 })
  })

const runsList = HttpRouter.add("GET", "/:owner/:name/ci", pageRoute(runsPage))

const show = HttpRouter.add("GET", "/:owner/:name/ci/runs/:id", pageRoute((session) =>
  Effect.gen(function*() {
    const { repo, run } = yield* routeRun(session)
    return yield* runPage(session, repo, run)
  })
))

/** One step's whole log as stored (secrets masked, escape sequences as written), streamed as plain text. */
const raw = HttpRouter.add("GET", "/:owner/:name/ci/runs/:id/steps/:step/raw", pageRoute((session) =>
  Effect.gen(function*() {
    const { repo, run, params } = yield* routeRun(session)
    const stepId = idParam(params.step)
    if (stepId === undefined || !run.jobs.some((job) => job.steps.some((step) => step.id === stepId))) {
      return yield* new ApiErrors.NotFound({ error: `step ${params.step ?? ""} not found`, code: "not_found" })
    }
    const store = yield* CiLogStore
    const pages = Stream.paginate(0, (after: number) =>
      Effect.map(store.after(repo.orgId, run.id, after), (pieces) => [
        pieces.filter((piece) => piece.stepId === stepId).map((piece) => piece.text),
        pieces.length < 1000 ? Option.none() : Option.some(pieces[pieces.length - 1]!.id)
      ] as const))
    return HttpServerResponse.stream(pages.pipe(Stream.encodeText), {
      contentType: "text/plain; charset=utf-8",
      headers: { ...pageHeaders("private"), "content-disposition": `inline; filename="run-${run.id}-step-${stepId}.log"` }
    })
  })
))

interface Rendering {
  readonly colours: ReadonlyMap<number, AnsiState>
}

/** The page's encoding of the follow events: log lines as HTML (the colours carried per step), step badges as HTML. */
const pageEvent = (state: Rendering, event: FollowEvent): readonly [Rendering, ReadonlyArray<string>] => {
  switch (event._tag) {
    case "Log": {
      const rendered = ansiToHtml(event.text, state.colours.get(event.stepId) ?? PLAIN)
      const colours = new Map(state.colours).set(event.stepId, rendered.state)
      return [{ colours }, [sse("log", { step_id: event.stepId, html: rendered.html }, event.id)]]
    }
    case "Step":
      return [state, [sse("step", { step_id: event.step.step_id, status: event.step.status, html: String(stepBadge({ id: event.step.step_id, ...event.step })) })]]
    case "End":
      return [state, [sse("end", { status: event.status, conclusion: event.conclusion ?? null })]]
    case "Keepalive":
      return [state, [": keepalive\n\n"]]
  }
}

const events = HttpRouter.add("GET", "/:owner/:name/ci/runs/:id/events", pageRoute((session) =>
  Effect.gen(function*() {
    const { repo, run } = yield* routeRun(session)
    const request = yield* HttpServerRequest.HttpServerRequest
    // A reconnecting EventSource says where it stopped; a first connection, where the page's log ends.
    const after = idParam(request.headers["last-event-id"]) ?? idParam((yield* query).get("after")) ?? 0
    const colours = parseStates((yield* query).get("ansi"))
    const body = (yield* followRun(repo, run.id, after)).pipe(Stream.mapAccum((): Rendering => ({ colours }), pageEvent), Stream.encodeText)
    return HttpServerResponse.stream(body, { contentType: "text/event-stream", headers: { ...pageHeaders("no-store"), ...sseHeaders } })
  })
))

/**
 * A posted Cancel or Re-run: the API's answer decides. Success goes to the run's page (a re-run's new
 * one); a refusal shows on the run page with the API's status and message.
 */
const action = (name: "cancel" | "rerun") =>
  HttpRouter.add("POST", `/:owner/:name/ci/runs/:id/${name}`, pageRoute((session) =>
    Effect.gen(function*() {
      const fields = yield* submittedForm(session)
      const { repo, run } = yield* routeRun(session)
      const base = repoHref(repo, "/ci/runs")
      const answer = name === "cancel"
        ? yield* callApi(session, "POST", `${base}/${run.id}/cancel`, { idempotencyKey: fields.get("idem") })
        : yield* callApi(session, "POST", base, {
          body: { workflow: run.workflowName, branch: run.branch, commit: run.commitHash },
          idempotencyKey: fields.get("idem")
        })
      if (answer.status >= 200 && answer.status < 300) {
        const started = answer.body["run_ids"]
        const next = name === "rerun" && Array.isArray(started) && typeof started[0] === "number" ? started[0] : run.id
        return HttpServerResponse.redirect(runHref(repo, next), { status: 303 })
      }
      const message = typeof answer.body["error"] === "string" ? answer.body["error"] : `the server answered ${answer.status}`
      const fresh = yield* routeRun(session)
      return yield* runPage(session, repo, fresh.run, {
        status: answer.status,
        body: html`<div class="notice bad" role="alert"><p><strong>${name === "cancel" ? "Not cancelled." : "Not started."}</strong> ${message}</p></div>`
      })
    })
  ))

export const CiPages = Layer.mergeAll(runsList, show, raw, events, action("cancel"), action("rerun"))
