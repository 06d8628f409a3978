/**
 * History and commits: `{site_url}/{owner}/{name}/commits` (main's first-parent history, or a
 * branch's own commits with `?branch=`), and a commit's page with its message and its diff (the
 * file changes the commit records, withheld paths left out), and a Revert button that posts to the
 * API's own `commits/{hash}/revert` (`web/Forms.ts`): the revert lands on the commit's branch.
 */
import { ApiErrors } from "@grove/api"
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { RepositoryRecord } from "../access/RepositoryRecord.ts"
import { Branches } from "../content/Branches.ts"
import { History } from "../content/History.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { routeRepository } from "../http/RawRoutes.ts"
import type { RepositoryRef } from "../path-permissions/PathPermissions.ts"
import { callApi, idempotencyField, submittedForm } from "../web/Forms.ts"
import { csrfField, layout } from "../web/Layout.ts"
import { htmlResponse, pageRoute } from "../web/Page.ts"
import { formatTime, html, type Node, shortHash } from "../web/Render.ts"
import { branchHref, repoCrumbs, repoHeader, repoHref } from "../web/RepoFrame.ts"
import type { PageSession } from "../web/Session.ts"
import { commitHref, commitList, visibleFileDiffs } from "./BranchViews.ts"

const HISTORY = 100

const history = HttpRouter.add("GET", "/:owner/:name/commits", pageRoute((session) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const { repo } = yield* routeRepository("read", session.caller)
    const branches = yield* Branches
    const commits = yield* History
    const name = new URL(request.url, "http://x").searchParams.get("branch") ?? "main"
    const branch = yield* dbUnavailable(branches.get(repo.id, name))
    if (branch === undefined) return yield* new ApiErrors.NotFound({ error: `branch '${name}' not found`, code: "branch_not_found" })
    const rows = branch.head === null
      ? []
      : name === "main"
      ? yield* dbUnavailable(commits.firstParentChain(repo.id, branch.head, HISTORY))
      : (yield* dbUnavailable(commits.branchCommits(repo.id, name, branch.head))).slice(-HISTORY).reverse()
    return yield* htmlResponse(layout({
      title: `Commits · ${repo.owner}/${repo.name}`,
      session,
      crumbs: repoCrumbs(repo, [{ label: "commits" }]),
      body: html`${repoHeader(repo, "commits")}<h2>${name === "main" ? "History of main" : html`Commits of <a href=${branchHref(repo, name)}>${name}</a>`}</h2>${commitList(repo, rows)}`
    }))
  })
))

const commitPage = (session: PageSession, repo: RepositoryRecord & RepositoryRef, hash: string, notice?: { readonly status: number; readonly body: Node }) =>
  Effect.gen(function*() {
    const commits = yield* History
    const commit = (yield* dbUnavailable(commits.publishedCommits(repo.id, [hash]))).get(hash)
    if (commit === undefined) return yield* new ApiErrors.NotFound({ error: `commit '${hash.slice(0, 100)}' not found`, code: "commit_not_found" })
    // A withheld file never appears: not in the file list, not in the diff.
    const files = yield* visibleFileDiffs(session.caller, repo, commit.files)
    const [title, ...rest] = (commit.message ?? "").split("\n")
    return yield* htmlResponse(layout({
      title: `${shortHash(commit.hash)} · ${repo.owner}/${repo.name}`,
      session,
      script: true,
      crumbs: repoCrumbs(repo, [{ label: "commits", href: repoHref(repo, "/commits") }, { label: shortHash(commit.hash) }]),
      body: html`${repoHeader(repo, "commits")}
${notice?.body ?? null}
<h2>${title || "(no message)"}</h2>
${rest.join("\n").trim() === "" ? null : html`<div class="box"><pre class="description markdown">${rest.join("\n").trim()}</pre></div>`}
<div class="meta"><span>by ${commit.author}</span><span>${formatTime(commit.timestamp)}</span><span>on <a href=${branchHref(repo, commit.branch_name)}>${commit.branch_name}</a></span>
<span class="mono">${commit.hash}</span>${
        commit.parent_hash === null ? null : html`<span>parent <a class="mono" href=${commitHref(repo, commit.parent_hash)}>${shortHash(commit.parent_hash)}</a></span>`
      }</div>
${session.user === undefined ? null : html`<div class="actions"><form method="post" action=${`${commitHref(repo, commit.hash)}/revert`} data-enhance>${csrfField(session)}${idempotencyField()}<button type="submit">Revert</button></form></div>`}
<h2>Changes</h2>${
        files.length === 0 ? html`<p class="muted">No file changes you can see.</p>` : files
      }`
    }), { status: notice?.status ?? 200 })
  })

const HASH = /^[0-9a-f]{64}$/

const show = HttpRouter.add("GET", "/:owner/:name/commits/:hash", pageRoute((session) =>
  Effect.gen(function*() {
    const { repo } = yield* routeRepository("read", session.caller)
    const { hash = "" } = yield* HttpRouter.params
    if (!HASH.test(hash)) return yield* new ApiErrors.NotFound({ error: "no such commit", code: "commit_not_found" })
    return yield* commitPage(session, repo, hash)
  })
))

/** Revert: the API decides (who may, whether the files changed since); success opens the new commit. */
const revert = HttpRouter.add("POST", "/:owner/:name/commits/:hash/revert", pageRoute((session) =>
  Effect.gen(function*() {
    const fields = yield* submittedForm(session)
    const { repo } = yield* routeRepository("read", session.caller)
    const { hash = "" } = yield* HttpRouter.params
    if (!HASH.test(hash)) return yield* new ApiErrors.NotFound({ error: "no such commit", code: "commit_not_found" })
    const answer = yield* callApi(session, "POST", `${repoHref(repo)}/commits/${hash}/revert`, { idempotencyKey: fields.get("idem") })
    const landed = answer.body["commit_hash"]
    if (answer.status < 300 && typeof landed === "string" && HASH.test(landed)) return HttpServerResponse.redirect(commitHref(repo, landed), { status: 303 })
    const message = typeof answer.body["error"] === "string" ? answer.body["error"] : `The server answered ${answer.status}.`
    return yield* commitPage(session, repo, hash, { status: answer.status, body: html`<p class="notice bad" role="alert"><strong>Not reverted.</strong> ${message}</p>` })
  })
))

export const CommitPages = Layer.mergeAll(history, show, revert)
