/**
 * `{site_url}/`: signed out, what this service is and a sign-in link; signed in, your repositories
 * and the branches waiting for you (open, by someone else, changed since you last read them).
 */
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { Repositories } from "../access/Repositories.ts"
import { waitingBranches } from "../content/WaitingBranches.ts"
import { ServerConfig } from "../Config.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { layout } from "./Layout.ts"
import { htmlResponse, pageRoute } from "./Page.ts"
import { formatTime, html } from "./Render.ts"
import { branchHref, repoHref } from "./RepoFrame.ts"
import type { PageSession } from "./Session.ts"

const REPOSITORIES_SHOWN = 100

const signedOut = (session: PageSession, siteUrl: string) =>
  layout({
    title: "Grove",
    session,
    body: html`<h1>Grove</h1>
<p>Repository hosting for branches, descriptions, squash merges and CI. Browse repositories, read a branch's changes,
merge it, and follow its CI here; work with the files through the <code>grove</code> client.</p>
<div class="actions"><a class="button" href="/-/signin">Sign in</a></div>
<p class="muted">From a terminal: <code>grove login --remote ${siteUrl}</code>. The API is at <a href="/api/openapi.json">${siteUrl}/api</a>.</p>`
  })

const home = HttpRouter.add("GET", "/", pageRoute((session) =>
  Effect.gen(function*() {
    const config = yield* ServerConfig
    if (session.user === undefined) return yield* htmlResponse(signedOut(session, config.siteUrl))
    const repositories = yield* Repositories
    const repos = (yield* dbUnavailable(
      repositories.listReadable(session.caller.principal, session.caller.limits, "updated", { limit: REPOSITORIES_SHOWN })
    )).map((keyed) => keyed.row)
    const waiting = yield* dbUnavailable(waitingBranches(repos.map((r) => r.id), session.user.username, 30))
    return yield* htmlResponse(layout({
      title: "Home",
      session,
      body: html`<h1>Welcome, ${session.user.username}</h1>
<section aria-labelledby="waiting-title"><h2 id="waiting-title">Branches waiting for you</h2>${
        waiting.length === 0 ? html`<p class="muted">Nothing new to read.</p>` : html`<div class="box"><table class="list"><caption class="skip">Branches waiting for you</caption>
<thead><tr><th scope="col">Branch</th><th scope="col">Repository</th><th scope="col" class="hide-narrow">By</th><th scope="col">Updated</th></tr></thead><tbody>${
          waiting.map((b) => html`<tr><td><a href=${branchHref({ owner: b.owner, name: b.repo }, b.name)}>${b.name}</a>${
            b.description === null ? null : html`<div class="muted">${b.description.split("\n")[0]}</div>`
          }</td><td>${b.owner}/${b.repo}</td><td class="hide-narrow">${b.createdBy}</td><td class="muted">${formatTime(b.updatedAt)}</td></tr>`)
        }</tbody></table></div>`
      }</section>
<section aria-labelledby="repos-title"><h2 id="repos-title">Repositories</h2>${
        repos.length === 0 ? html`<p class="muted">None yet: <code>grove repo create NAME</code> makes one.</p>` : html`<div class="box"><table class="list"><caption class="skip">Repositories</caption>
<thead><tr><th scope="col">Repository</th><th scope="col">Visibility</th><th scope="col" class="hide-narrow">Updated</th></tr></thead><tbody>${
          repos.map((r) => html`<tr><td><a href=${repoHref(r)}>${r.owner}/${r.name}</a>${
            r.description === null ? null : html`<div class="muted">${r.description}</div>`
          }</td><td><span class="badge">${r.isPublic ? "Public" : "Private"}</span></td><td class="hide-narrow muted">${formatTime(r.updatedAt)}</td></tr>`)
        }</tbody></table></div>`
      }</section>`
    }))
  })
))

export const HomePage = Layer.mergeAll(home)
