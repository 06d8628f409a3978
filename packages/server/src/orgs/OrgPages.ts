/**
 * The organization pages: the viewer's organizations (`/-/orgs`, with a form to create one), an
 * organization's overview (`/-/orgs/{slug}`: its repositories the viewer may see, storage against
 * quota, its site) and its settings (`/settings`, admins: name and description, the site on or off,
 * the quota, which only an instance admin may set). Reads use the API's read services
 * (Authorizer, Organizations, web/OrgRepositories, ContentObjects, and the site through web/OrgSite,
 * which sites/ provides: sites/ builds on orgs/, so orgs/ may not import it). Every change posts to
 * the API's own endpoint (`web/Forms.ts`).
 */
import { ApiErrors } from "@grove/api"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { Organizations } from "../access/Organizations.ts"
import { ContentObjects } from "../content/ContentObjects.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { type ApiRequest, formWrite, idempotencyField, type Notice, postButton } from "../web/Forms.ts"
import { csrfField, layout } from "../web/Layout.ts"
import { managesOrg, orgApi, ORGS_HREF, orgHref, orgPage, type OrgShape, pageOrganization, slugParam } from "../web/OrgFrame.ts"
import { orgRepositories } from "../web/OrgRepositories.ts"
import { OrgSites, type OrgSiteView } from "../web/OrgSite.ts"
import { htmlResponse, pageRoute } from "../web/Page.ts"
import { formatSize, formatTime, html, type Node } from "../web/Render.ts"
import { repoHref } from "../web/RepoFrame.ts"
import type { PageSession } from "../web/Session.ts"

const SHOWN = 200

const signedIn = (session: PageSession) =>
  session.user === undefined
    ? Effect.fail(new ApiErrors.Unauthorized({ error: "Sign in to see your organizations.", code: "unauthenticated" }))
    : Effect.succeed(session.user)

const listPage = (session: PageSession, notice?: Notice) =>
  Effect.gen(function*() {
    const user = yield* signedIn(session)
    const orgs = (yield* dbUnavailable((yield* Organizations).listForUser(user.id, { limit: SHOWN }))).map((keyed) => keyed.row)
    return yield* htmlResponse(layout({
      title: "Organizations",
      session,
      crumbs: [{ label: "Organizations" }],
      body: html`<h1>Organizations</h1>${notice?.body ?? null}
${
        orgs.length === 0 ? html`<p class="muted">You belong to no organization.</p>` : html`<div class="box"><table class="list"><caption class="skip">Your organizations</caption>
<thead><tr><th scope="col">Organization</th><th scope="col">Your role</th><th scope="col" class="hide-narrow">Created</th></tr></thead><tbody>${
          orgs.map((o) => html`<tr><td><a href=${orgHref(o.slug)}>${o.name}</a><div class="muted"><span class="mono">${o.slug}</span>${
            o.personal ? html` <span class="badge">Personal</span>` : null
          }</div></td><td>${o.role}</td><td class="hide-narrow muted">${formatTime(o.createdAt)}</td></tr>`)
        }</tbody></table></div>`
      }
<h2>New organization</h2>
<form method="post" action=${ORGS_HREF} class="narrow">${csrfField(session)}${idempotencyField()}
<label for="org-slug">Short name (in addresses)</label><input type="text" id="org-slug" name="slug" required maxlength="39" autocomplete="off" />
<label for="org-name">Name</label><input type="text" id="org-name" name="name" required maxlength="100" />
<div class="actions"><button type="submit" class="primary">Create organization</button></div></form>`
    }), { status: notice?.status ?? 200 })
  })

const siteOf = (org: OrgShape) => Effect.flatMap(OrgSites, (sites) => dbUnavailable(sites.find(org.slug)))

const usageOf = (org: OrgShape) => Effect.flatMap(ContentObjects, (objects) => dbUnavailable(objects.orgUsage(org.id)))

const storage = (usage: { readonly usedBytes: number; readonly quotaBytes: number }): Node =>
  html`<p><meter id="storage-used" min="0" max=${Math.max(usage.quotaBytes, 1)} value=${Math.min(usage.usedBytes, Math.max(usage.quotaBytes, 1))} aria-label="Storage used"></meter>
<span>${formatSize(usage.usedBytes)} used of ${formatSize(usage.quotaBytes)}${
    usage.quotaBytes > 0 ? ` (${Math.round((usage.usedBytes / usage.quotaBytes) * 1000) / 10}%)` : ""
  }</span></p>`

const siteLine = (site: OrgSiteView | undefined): Node =>
  site === undefined
    ? html`<p>Site: <span class="badge">Off</span></p>`
    : html`<p>Site: <span class="badge ok">On</span> serving <span class="mono">${site.repoName}/${site.sourceDir}</span> ${
      site.published ? html`at <a href=${site.url}>${site.url}</a>` : html`<span class="muted">(not published while the repository is private)</span>`
    }</p>`

const overview = (session: PageSession, slug: string) =>
  Effect.gen(function*() {
    const org = yield* pageOrganization(session, slug)
    const repos = yield* orgRepositories(session, org)
    const usage = yield* usageOf(org)
    const site = yield* siteOf(org)
    return yield* orgPage({
      session,
      org,
      tab: "overview",
      title: "Overview",
      body: html`<section aria-labelledby="repos-title"><h2 id="repos-title">Repositories</h2>${
        repos.length === 0 ? html`<p class="muted">No repositories yet.</p>` : html`<div class="box"><table class="list"><caption class="skip">Repositories</caption>
<thead><tr><th scope="col">Repository</th><th scope="col">Visibility</th><th scope="col" class="hide-narrow">Updated</th></tr></thead><tbody>${
          repos.map((r) => html`<tr><td><a href=${repoHref(r)}>${r.name}</a>${r.description === null ? null : html`<div class="muted">${r.description}</div>`}</td>
<td><span class="badge">${r.isPublic ? "Public" : "Private"}</span></td><td class="hide-narrow muted">${formatTime(r.updatedAt)}</td></tr>`)
        }</tbody></table></div>`
      }</section>
<section aria-labelledby="storage-title"><h2 id="storage-title">Storage</h2>${storage(usage)}</section>
<section aria-labelledby="site-title"><h2 id="site-title">Site</h2>${siteLine(site)}${
        managesOrg(session, org) ? html`<p><a href=${orgHref(org.slug, "/settings")}>Change the site and settings</a></p>` : null
      }</section>`
    })
  })

const settings = (session: PageSession, slug: string, notice?: Notice) =>
  Effect.gen(function*() {
    const org = yield* pageOrganization(session, slug, "admin")
    const repos = yield* orgRepositories(session, org)
    const usage = yield* usageOf(org)
    const site = yield* siteOf(org)
    const action = (rest: string) => orgHref(org.slug, `/settings${rest}`)
    const siteAdmin = session.user?.siteAdmin === true
    return yield* orgPage({
      session,
      org,
      tab: "settings",
      title: "Settings",
      notice,
      body: html`<section aria-labelledby="profile-title"><h2 id="profile-title">Profile</h2>
<form method="post" action=${action("")} class="narrow">${csrfField(session)}${idempotencyField()}
<label for="org-name">Name</label><input type="text" id="org-name" name="name" required maxlength="100" value=${org.name} />
<label for="org-description">Description</label><input type="text" id="org-description" name="description" maxlength="2000" value=${org.description ?? ""} />
<div class="actions"><button type="submit" class="primary">Save</button></div></form></section>
<section aria-labelledby="site-title"><h2 id="site-title">Site</h2>${siteLine(site)}
<p class="muted">A site serves main's files of one repository of this organization; it is published while that repository is public.</p>${
        repos.length === 0 ? html`<p class="muted">Create a repository first.</p>` : html`<form method="post" action=${action("/site")} class="narrow">${csrfField(session)}${idempotencyField()}
<label for="site-repo">Repository</label><select id="site-repo" name="repo">${
          repos.map((r) => html`<option value=${r.name} selected=${site?.repoName === r.name}>${r.name}${r.isPublic ? "" : " (private)"}</option>`)
        }</select>
<label for="site-dir">Folder</label><input type="text" id="site-dir" name="source_dir" maxlength="1000" placeholder="/" value=${site === undefined ? "" : `/${site.sourceDir}`} />
<div class="actions"><button type="submit" class="primary">${site === undefined ? "Turn the site on" : "Save the site"}</button></div></form>`
      }${site === undefined ? null : html`<div class="actions">${postButton(session, action("/site/off"), "Turn the site off", { danger: true })}</div>`}</section>
<section aria-labelledby="storage-title"><h2 id="storage-title">Storage</h2>${storage(usage)}${
        siteAdmin
          ? html`<form method="post" action=${action("/quota")} class="narrow">${csrfField(session)}${idempotencyField()}
<label for="org-quota">Quota in MiB</label><input type="text" id="org-quota" name="quota_mib" inputmode="numeric" required value=${String(Math.round(usage.quotaBytes / 1048576))} />
<div class="actions"><button type="submit">Set quota</button></div></form>`
          : html`<p class="muted">Only an instance admin changes the quota.</p>`
      }</section>`
    })
  })

/** A settings form: its fields to an API request, back to the settings page, or the page again with the refusal. */
const settingsWrite = (path: string, request: (slug: string, fields: URLSearchParams) => ApiRequest) =>
  HttpRouter.add("POST", `/-/orgs/:slug/settings${path}`, pageRoute((session) =>
    Effect.gen(function*() {
      const slug = yield* slugParam
      return yield* formWrite(session, (fields) => request(slug, fields), orgHref(slug, "/settings"), (notice) => settings(session, slug, notice))
    })
  ))

const mib = (text: string | null) => {
  const value = Number((text ?? "").trim())
  // Not a number: sent as given, so the API's own check answers.
  return Number.isFinite(value) && (text ?? "").trim() !== "" ? Math.round(value * 1048576) : text
}

export const OrgPages = Layer.mergeAll(
  HttpRouter.add("GET", ORGS_HREF, pageRoute((session) => listPage(session))),
  HttpRouter.add("POST", ORGS_HREF, pageRoute((session) =>
    Effect.gen(function*() {
      yield* signedIn(session)
      return yield* formWrite(session, (fields) => ({
        method: "POST",
        path: "/orgs",
        body: { slug: (fields.get("slug") ?? "").trim(), name: (fields.get("name") ?? "").trim() }
      }), (fields) => orgHref((fields.get("slug") ?? "").trim()), (notice) => listPage(session, notice))
    })
  )),
  HttpRouter.add("GET", "/-/orgs/:slug", pageRoute((session) => Effect.flatMap(slugParam, (slug) => overview(session, slug)))),
  HttpRouter.add("GET", "/-/orgs/:slug/settings", pageRoute((session) => Effect.flatMap(slugParam, (slug) => settings(session, slug)))),
  settingsWrite("", (slug, fields) => {
    const description = (fields.get("description") ?? "").trim()
    return { method: "PATCH", path: orgApi(slug), body: { name: (fields.get("name") ?? "").trim(), description: description === "" ? null : description } }
  }),
  settingsWrite("/site", (slug, fields) => {
    const dir = (fields.get("source_dir") ?? "").trim().replace(/^\/+|\/+$/g, "")
    return { method: "PUT", path: orgApi(slug, "/site"), body: { repo: fields.get("repo") ?? "", ...(dir === "" ? {} : { source_dir: dir }) } }
  }),
  settingsWrite("/site/off", (slug) => ({ method: "DELETE", path: orgApi(slug, "/site") })),
  settingsWrite("/quota", (slug, fields) => ({ method: "PUT", path: orgApi(slug, "/quota"), body: { quota_bytes: mib(fields.get("quota_mib")) } }))
)
