/** The pieces of the CI pages: state badges, durations, the runs table, a run's jobs and step logs. */
import { commitHref } from "../branches/BranchViews.ts"
import { csrfField } from "../web/Layout.ts"
import { idempotencyField } from "../web/Forms.ts"
import { formatTime, html, type Node, shortHash } from "../web/Render.ts"
import { ciRunsHref, repoHref, type RepoShape } from "../web/RepoFrame.ts"
import type { PageSession } from "../web/Session.ts"
import { tailToHtml } from "./CiAnsi.ts"
import type { CiRunRecord, Conclusion, JobState, RunStatus, StepState } from "./CiRecord.ts"

/** A step's log on the run page: its last lines at once, the whole one behind the raw link. */
export const LOG_LINES = 1000
/** Runs with at most this many steps show all their logs open. */
const OPEN_STEPS = 8

export const runHref = (repo: Pick<RepoShape, "owner" | "name">, id: number, rest = "") => repoHref(repo, `/ci/runs/${id}${rest}`)
export const rawLogHref = (repo: Pick<RepoShape, "owner" | "name">, runId: number, stepId: number) => runHref(repo, runId, `/steps/${stepId}/raw`)

/** The state in a word and its colour: running, queued, or the conclusion. */
export const stateBadge = (status: RunStatus, conclusion: Conclusion | null, id?: string): Node => {
  const word = status === "completed" ? conclusion ?? "completed" : status
  const tone = word === "success" ? "ok" : word === "failure" || word === "timed_out" ? "bad" : word === "running" ? "warn" : ""
  return html`<span class=${`badge ${tone}`.trim()} id=${id}>${word === "timed_out" ? "timed out" : word}</span>`
}

/** "4.2 s", "3 min 05 s", "1 h 02 min"; empty before it started. */
export const formatDuration = (from: Date | string | null, to: Date | string | null, now = Date.now()): string => {
  if (from === null) return ""
  const ms = (to === null ? now : new Date(to).getTime()) - new Date(from).getTime()
  if (!Number.isFinite(ms) || ms < 0) return ""
  const s = ms / 1000
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ${String(Math.round(s % 60)).padStart(2, "0")} s`
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`
}

const trigger = (run: CiRunRecord) => `${run.event} by ${run.triggeredBy}`

export const runsTable = (repo: RepoShape, runs: ReadonlyArray<CiRunRecord>): Node =>
  html`<div class="box"><table class="list"><caption class="skip">CI runs, newest first</caption>
<thead><tr><th scope="col">State</th><th scope="col">Run</th><th scope="col">Branch</th><th scope="col" class="hide-narrow">Commit</th><th scope="col" class="hide-narrow">Trigger</th><th scope="col">Duration</th></tr></thead>
<tbody>${
    runs.map((run) =>
      html`<tr><td>${stateBadge(run.status, run.conclusion)}</td>
<td><a href=${runHref(repo, run.id)}>${run.workflowName} #${run.id}</a><div class="muted">${formatTime(run.queuedAt)}</div></td>
<td><a href=${ciRunsHref(repo, run.branch)}>${run.branch}</a></td>
<td class="hide-narrow mono"><a href=${commitHref(repo, run.commitHash)}>${shortHash(run.commitHash)}</a></td>
<td class="hide-narrow">${trigger(run)}</td>
<td class="num">${formatDuration(run.startedAt, run.finishedAt)}</td></tr>`
    )
  }</tbody></table></div>`

/** Cancel (a run not finished) or Re-run (a finished one), for those who may write. */
export const runActions = (session: PageSession, repo: RepoShape, run: CiRunRecord): Node => {
  const form = (action: string, label: string) =>
    html`<form method="post" action=${runHref(repo, run.id, `/${action}`)}>${csrfField(session)}${idempotencyField()}<button type="submit" class=${action === "cancel" ? "danger" : undefined}>${label}</button></form>`
  return html`<div class="actions" id="ci-actions">${run.status === "completed" ? form("rerun", "Re-run") : form("cancel", "Cancel run")}</div>`
}

export const runSummary = (repo: RepoShape, run: CiRunRecord): Node =>
  html`<h2>${run.workflowName} #${run.id} ${stateBadge(run.status, run.conclusion, "ci-run-state")}</h2>
<div class="meta"><span>on <a href=${ciRunsHref(repo, run.branch)}>${run.branch}</a></span>
<span>commit <a class="mono" href=${commitHref(repo, run.commitHash)}>${shortHash(run.commitHash)}</a></span>
<span>${trigger(run)}</span><span>queued ${formatTime(run.queuedAt)}</span>${
    run.startedAt === null ? null : html`<span>${run.finishedAt === null ? "running for" : "took"} ${formatDuration(run.startedAt, run.finishedAt)}</span>`
  }<span class="mono">${run.workflowPath}</span></div>
${run.error === null ? null : html`<p class="notice bad" role="alert">${run.error}</p>`}`

/** A step's state badge, as the page renders it and as the live events replace it. */
export const stepBadge = (step: Pick<StepState, "id" | "status" | "conclusion">): Node => stateBadge(step.status, step.conclusion, `ci-step-state-${step.id}`)

const stepBlock = (repo: RepoShape, run: CiRunRecord, step: StepState, log: string): Node => {
  const tail = tailToHtml(log, LOG_LINES)
  // A short run shows every step's log; a long one, those running or failed (the others open on a click, no script needed).
  const open = run.jobs.reduce((n, job) => n + job.steps.length, 0) <= OPEN_STEPS || step.status === "running" ||
    step.conclusion === "failure" || step.conclusion === "timed_out"
  return html`<details class="step" id=${`ci-step-${step.id}`} open=${open}>
<summary><span class="step-name">${step.name}</span> ${stepBadge(step)}${
    step.exit_code === null ? null : html` <span class="muted">exit ${step.exit_code}</span>`
  } <span class="muted">${formatDuration(step.started_at, step.finished_at)}</span></summary>
${tail.cut ? html`<p class="muted log-cut">Showing the last ${LOG_LINES.toLocaleString("en")} lines. <a href=${rawLogHref(repo, run.id, step.id)}>The whole log</a></p>` : null}
<pre class="log" id=${`ci-log-${step.id}`} tabindex="0" role="log" aria-label=${`Log of ${step.name}`} dangerouslySetInnerHTML=${{ __html: tail.html }}></pre>
<p class="log-raw"><a href=${rawLogHref(repo, run.id, step.id)}>Raw log of ${step.name}</a></p>
</details>`
}

export const jobBlock = (repo: RepoShape, run: CiRunRecord, job: JobState, logs: ReadonlyMap<number, string>): Node =>
  html`<section class="box job" aria-label=${`Job ${job.name}`}><header><h3>${job.name}</h3>${stateBadge(job.status, job.conclusion)}${
    job.needs.length === 0 ? null : html`<span class="muted">needs ${job.needs.join(", ")}</span>`
  }</header>${job.steps.map((step) => stepBlock(repo, run, step, logs.get(step.id) ?? ""))}</section>`
