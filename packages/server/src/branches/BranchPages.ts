/**
 * The branch pages. `{site_url}/{owner}/{name}/branches` lists them (open or closed) with CI state and
 * whether each open one merges cleanly; `{site_url}/{owner}/{name}/branches/{branch}` (the address the
 * Oak client's `open` uses, `/` in the name as %2F) shows the description, the commits and the diff
 * against the merge base with main, and records a read receipt. Both read what the merge preview
 * reads (`previewMerge`); Merge, Close and Reopen post to the API's own endpoints (`web/Forms.ts`).
 */
import { ApiErrors } from "@grove/api"
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { RepositoryRecord } from "../access/RepositoryRecord.ts"
import { type BranchRecord, toApiBranch } from "../content/BranchRecord.ts"
import { Branches } from "../content/Branches.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { answer, requestCaller, routeRepository } from "../http/RawRoutes.ts"
import { previewMerge } from "../merges/MergePlanner.ts"
import { callerPolicy } from "../path-permissions/CallerPolicy.ts"
import type { RepositoryRef } from "../path-permissions/PathPermissions.ts"
import { callApi, submittedForm } from "../web/Forms.ts"
import { layout } from "../web/Layout.ts"
import { htmlResponse, notUnderApi, pageRoute, wantsJson } from "../web/Page.ts"
import { formatTime, html, type Node, shortHash } from "../web/Render.ts"
import { branchHref, ciRunsHref, repoCrumbs, repoHeader, repoHref } from "../web/RepoFrame.ts"
import type { PageSession } from "../web/Session.ts"
import { actionForm, branchTable, ciBadge, commitList, mergeBadge, type MergeState, refusalNotice, stateBadge, visibleFileDiffs } from "./BranchViews.ts"

/** Files above this are shown as "too large" in a diff. */
/** Open branches whose merge state the list computes (each is a merge preview). */
const LIST_PREVIEWS = 20

/** The merge preview, its refusals (a missing branch) as "not found". */
const preview = (repo: RepositoryRecord, name: string) =>
  dbUnavailable(previewMerge(repo, name)).pipe(
    Effect.catchTag("LandingRefused", (refusal) =>
      Effect.fail(new ApiErrors.NotFound({ error: refusal.message, code: "branch_not_found" })))
  )

const listPage = (session: PageSession) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const { repo } = yield* routeRepository("read", session.caller)
    const branches = yield* Branches
    const closed = new URL(request.url, "http://x").searchParams.get("status") === "closed"
    const all = yield* dbUnavailable(branches.list(repo.id))
    const shown = all.filter((b) => closed ? b.status !== "open" : b.status === "open").slice(0, 200)
    const rows: Array<{ branch: BranchRecord; state: MergeState | undefined }> = []
    for (const [i, branch] of shown.entries()) {
      const state = !closed && i < LIST_PREVIEWS && branch.name !== "main" && branch.head !== null
        ? yield* preview(repo, branch.name).pipe(Effect.map((p) => ({ merge: p.merge, ci: p.ci.state })))
        : undefined
      rows.push({ branch, state })
    }
    return yield* htmlResponse(layout({
      title: `Branches · ${repo.owner}/${repo.name}`,
      session,
      crumbs: repoCrumbs(repo, [{ label: "branches" }]),
      body: html`${repoHeader(repo, "branches")}
<nav class="tabs" aria-label="Branch state"><a href=${repoHref(repo, "/branches")} aria-current=${closed ? undefined : "page"}>Open</a><a href=${repoHref(repo, "/branches?status=closed")} aria-current=${closed ? "page" : undefined}>Closed</a></nav>
${rows.length === 0 ? html`<p class="muted">No ${closed ? "closed" : "open"} branches.</p>` : branchTable(repo, rows)}`
    }))
  })

/** The branch page, with a notice (a refused action's answer) when a form was just posted. */
const branchPage = (session: PageSession, repo: RepositoryRecord & RepositoryRef, name: string, notice?: { readonly status: number; readonly body: Node }) =>
  Effect.gen(function*() {
    const branches = yield* Branches
    const branch = yield* dbUnavailable(branches.get(repo.id, name))
    if (branch === undefined) return yield* new ApiErrors.NotFound({ error: `branch '${name}' not found`, code: "branch_not_found" })
    // Opening the page is reading the branch: the receipt is the API's (`record_read=1`), by the same read service.
    const readers = session.user === undefined ? [] : yield* dbUnavailable(branches.recordRead(repo.id, branch.name, session.user.username))
    const planned = yield* preview(repo, branch.name)
    // A withheld file never appears: not in the file list, not in the diff.
    const files = yield* visibleFileDiffs(session.caller, repo, planned.files)
    const canAct = session.user !== undefined && branch.name !== "main"
    const actions: Node = !canAct ? null : branch.status === "open"
      ? html`<div class="actions">${actionForm(session, repo, branch.name, "merge", "Merge into main", { primary: true })}${actionForm(session, repo, branch.name, "close", "Close")}</div>`
      : branch.status === "closed" ? html`<div class="actions">${actionForm(session, repo, branch.name, "reopen", "Reopen")}</div>` : null
    return yield* htmlResponse(layout({
      title: `${branch.name} · ${repo.owner}/${repo.name}`,
      session,
      script: true,
      crumbs: repoCrumbs(repo, [{ label: "branches", href: repoHref(repo, "/branches") }, { label: branch.name }]),
      body: html`${repoHeader(repo, "branches")}
${notice?.body ?? null}
<h2>${branch.name}</h2>
<div class="meta">${stateBadge(branch.status)} ${ciBadge(planned.ci.state, ciRunsHref(repo, branch.name))} ${mergeBadge(planned.merge)}
<span>by ${branch.createdBy}</span><span>head <span class="mono">${shortHash(branch.head)}</span></span><span>updated ${formatTime(branch.updatedAt)}</span></div>
${branch.description === null ? html`<p class="muted">No description. It becomes the squash commit's message: set it with <code>grove desc</code>.</p>` : html`<div class="box"><pre class="description markdown">${branch.description}</pre></div>`}
${readers.length === 0 ? null : html`<p class="muted">Also read by ${readers.map((r) => r.name).join(", ")}.</p>`}
${actions}
<h2>Commits</h2>${commitList(repo, planned.commits)}
<h2>Changes against main</h2>${
        files.length === 0 ? html`<p class="muted">No changes since the merge base.</p>` : files
      }`
    }), { status: notice?.status ?? 200 })
  })

const branchName = Effect.map(HttpRouter.params, (params) => params.branch ?? "")

/** A client asking for JSON gets what `GET /api/{owner}/{name}/branches/{branch}` answers, by its bearer token. */
const branchJson = answer(Effect.gen(function*() {
  const { repo } = yield* routeRepository("read", yield* requestCaller)
  const branches = yield* Branches
  const name = yield* branchName
  const branch = yield* dbUnavailable(branches.get(repo.id, name))
  if (branch === undefined) return yield* new ApiErrors.NotFound({ error: `branch '${name}' not found`, code: "branch_not_found" })
  return HttpServerResponse.jsonUnsafe(toApiBranch(branch), { headers: { vary: "accept", "cache-control": "private, no-cache" } })
}))

const show = HttpRouter.add("GET", "/:owner/:name/branches/:branch", Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  yield* notUnderApi
  return yield* (wantsJson(request) ? branchJson : pageRoute((session) =>
    Effect.gen(function*() {
      const { repo } = yield* routeRepository("read", session.caller)
      return yield* branchPage(session, repo, yield* branchName)
    })
  ))
}))

const list = HttpRouter.add("GET", "/:owner/:name/branches", pageRoute(listPage))

/**
 * A posted action: the API's answer decides. Success goes back to the branch page (a reload does not
 * post again); a refusal shows on the branch page with the API's status, its message, the conflicting
 * paths the caller may see, and, after a 412, the Force button.
 */
const action = (name: "merge" | "close" | "reopen") =>
  HttpRouter.add("POST", `/:owner/:name/branches/:branch/${name}`, pageRoute((session) =>
    Effect.gen(function*() {
      const fields = yield* submittedForm(session)
      const { repo } = yield* routeRepository("read", session.caller)
      const branch = yield* branchName
      const force = name === "merge" && fields.get("force") === "1"
      const answer = yield* callApi(session, "POST", `${repoHref(repo)}/branches/${encodeURIComponent(branch)}/${name}${force ? "?force=1" : ""}`, {
        idempotencyKey: fields.get("idem")
      })
      if (answer.status >= 200 && answer.status < 300) {
        return HttpServerResponse.redirect(branchHref(repo, branch), { status: 303 })
      }
      const policy = yield* callerPolicy(session.caller, repo)
      const paths = Array.isArray(answer.body["conflict_paths"]) ? answer.body["conflict_paths"].filter((p) => typeof p === "string" && policy.canRead(p)) : undefined
      const body = { ...answer.body, ...(paths === undefined ? {} : { conflict_paths: paths }) }
      return yield* branchPage(session, repo, branch, { status: answer.status, body: refusalNotice(session, repo, branch, answer.status, body) })
    })
  ))

export const BranchPages = Layer.mergeAll(list, show, action("merge"), action("close"), action("reopen"))
