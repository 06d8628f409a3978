/**
 * An organization's webhooks (`/-/orgs/{slug}/webhooks`): per repository, its hooks (URL, events,
 * whether deliveries are signed; the secret never), a form to add one and a Delete button; and one
 * hook's delivery log (`/-/orgs/{slug}/webhooks/{repo}/{id}`: status, attempts, response code,
 * duration, time, error) with Redeliver. Reads are the API's (`Webhooks.list`, `.find`,
 * `.deliveries`); writes post to the API's own endpoints (its URL checks, its entity commands).
 * For the organization's owners and admins; a hook's page also needs write access to its repository,
 * as the API's delivery log does (otherwise the 404 page).
 */
import { ApiErrors } from "@grove/api"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { Authorizer } from "../access/Authorizer.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { formWrite, idempotencyField, type Notice, postButton } from "../web/Forms.ts"
import { csrfField } from "../web/Layout.ts"
import { orgHref, orgPage, pageOrganization, slugParam } from "../web/OrgFrame.ts"
import { orgRepositories, repositoryField } from "../web/OrgRepositories.ts"
import { pageRoute } from "../web/Page.ts"
import { formatTime, html, type Node } from "../web/Render.ts"
import type { PageSession } from "../web/Session.ts"
import { toApiWebhook } from "./WebhookRecord.ts"
import { Webhooks } from "./Webhooks.ts"

const EVENTS = ["push", "branch.created", "merge"] as const
/** Deliveries a hook's page shows, newest first. */
const DELIVERIES_SHOWN = 50

const hookHref = (slug: string, repo: string, id: string, rest = "") =>
  orgHref(slug, `/webhooks/${encodeURIComponent(repo)}/${encodeURIComponent(id)}${rest}`)
const hooksApi = (slug: string, repo: string, rest = "") => `/${encodeURIComponent(slug)}/${encodeURIComponent(repo)}/webhooks${rest}`

const statusBadge = (status: string): Node =>
  html`<span class=${`badge ${status === "succeeded" ? "ok" : status === "dead" || status === "skipped" ? "bad" : "warn"}`}>${status}</span>`

const listPage = (session: PageSession, slug: string, notice?: Notice) =>
  Effect.gen(function*() {
    const org = yield* pageOrganization(session, slug, "admin")
    const webhooks = yield* Webhooks
    const repos = yield* orgRepositories(session, org)
    const sections = yield* Effect.forEach(repos, (repo) => Effect.map(dbUnavailable(webhooks.list(repo.id)), (hooks) => ({ repo, hooks })))
    return yield* orgPage({
      session,
      org,
      tab: "webhooks",
      title: "Webhooks",
      notice,
      body: html`<p class="muted">A repository's webhooks receive its push, branch.created and merge events, signed when a secret is set.</p>
${repos.length === 0 ? html`<p class="muted">No repositories yet.</p>` : null}${
        sections.map(({ repo, hooks }) =>
          html`<section class="box" aria-labelledby=${`hooks-${repo.name}`}><header><h2 id=${`hooks-${repo.name}`}>${repo.owner}/${repo.name}</h2></header>${
            hooks.length === 0
              ? html`<p class="pad muted">No webhooks.</p>`
              : html`<table class="list"><caption class="skip">Webhooks of ${repo.name}</caption>
<thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col" class="hide-narrow">Signed</th><th scope="col" class="hide-narrow">Added</th><th scope="col"><span class="skip">Actions</span></th></tr></thead>
<tbody>${
                hooks.map((hook) =>
                  html`<tr><td class="wrap"><a href=${hookHref(org.slug, repo.name, hook.id)} aria-label=${`Deliveries of ${hook.url}`}>${hook.url}</a></td>
<td>${hook.events.join(", ")}</td><td class="hide-narrow">${hook.has_secret ? "yes" : "no"}</td>
<td class="hide-narrow muted">${hook.created_by}, ${formatTime(hook.created_at)}</td><td>${
                    postButton(session, hookHref(org.slug, repo.name, hook.id, "/delete"), "Delete", { danger: true, ariaLabel: `Delete the webhook ${hook.url}` })
                  }</td></tr>`
                )
              }</tbody></table>`
          }</section>`
        )
      }${
        repos.length === 0 ? null : html`<h2>Add a webhook</h2>
<form method="post" action=${orgHref(org.slug, "/webhooks")} class="narrow">${csrfField(session)}${idempotencyField()}
${repositoryField("hook-repo", repos)}
<label for="hook-url">Payload URL</label><input type="url" id="hook-url" name="url" required maxlength="2048" placeholder="https://example.com/hook" autocomplete="off" />
<fieldset class="scopes"><legend>Events (none chosen: all)</legend>${
          EVENTS.map((event) => html`<label class="check"><input type="checkbox" name="events" value=${event} />${event}</label>`)
        }</fieldset>
<label for="hook-secret">Secret (optional)</label><input type="password" id="hook-secret" name="secret" maxlength="256" autocomplete="new-password" aria-describedby="hook-secret-hint" />
<p class="muted" id="hook-secret-hint">Deliveries are signed with it. It is never shown again.</p>
<div class="actions"><button type="submit" class="primary">Add webhook</button></div></form>`
      }`
    })
  })

/** The hook of `/-/orgs/:slug/webhooks/:repo/:id`, as the API's delivery log finds it: write access to the repository, or 404. */
const routeHook = (session: PageSession) =>
  Effect.gen(function*() {
    const slug = yield* slugParam
    const params = yield* HttpRouter.params
    const org = yield* pageOrganization(session, slug, "admin")
    const repo = yield* dbUnavailable((yield* Authorizer).repository(session.caller, org.slug, params.repo ?? "", "write"))
    const id = params.id ?? ""
    const row = /^[0-9a-f-]{36}$/.test(id) ? yield* dbUnavailable((yield* Webhooks).find(repo.id, id)) : undefined
    if (row === undefined) return yield* new ApiErrors.NotFound({ error: `webhook ${id} not found`, code: "not_found" })
    return { org, repo, hook: toApiWebhook(row) }
  })

const hookPage = (session: PageSession, notice?: Notice) =>
  Effect.gen(function*() {
    const { org, repo, hook } = yield* routeHook(session)
    const rows = yield* dbUnavailable((yield* Webhooks).deliveries(hook.id, { limit: DELIVERIES_SHOWN }))
    const deliveries = rows.slice(0, DELIVERIES_SHOWN).map((keyed) => keyed.row)
    const redeliverHref = (delivery: string) => hookHref(org.slug, repo.name, hook.id, `/deliveries/${encodeURIComponent(delivery)}/redeliver`)
    return yield* orgPage({
      session,
      org,
      tab: "webhooks",
      title: "Webhook deliveries",
      crumbs: [{ label: "Webhooks", href: orgHref(org.slug, "/webhooks") }, { label: `${repo.name}: ${hook.url}` }],
      notice,
      body: html`<h2>Deliveries to <span class="wrap">${hook.url}</span></h2>
<div class="meta"><span>${repo.owner}/${repo.name}</span><span>events ${hook.events.join(", ")}</span><span>${hook.has_secret ? "signed" : "unsigned"}</span></div>
${
        deliveries.length === 0
          ? html`<p class="muted">No deliveries yet: they appear here when the repository has an event this hook receives.</p>`
          : html`<div class="box"><table class="list deliveries"><caption class="skip">Deliveries, newest first</caption>
<thead><tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col" class="num">Attempts</th><th scope="col" class="num">Response</th><th scope="col" class="num hide-narrow">Duration</th><th scope="col" class="hide-narrow">Error</th><th scope="col"><span class="skip">Actions</span></th></tr></thead>
<tbody>${
            deliveries.map((d) =>
              html`<tr><td class="muted nowrap">${formatTime(d.created_at)}${d.redelivery_of === null ? null : html`<div class="muted">redelivery</div>`}</td><td>${d.event}</td>
<td>${statusBadge(d.status)}</td><td class="num">${d.attempts}</td><td class="num">${d.status_code ?? "—"}</td>
<td class="num hide-narrow">${d.duration_ms === null ? "—" : `${d.duration_ms} ms`}</td><td class="hide-narrow wrap">${d.error ?? ""}</td><td>${
                postButton(session, redeliverHref(d.id), "Redeliver", { ariaLabel: `Redeliver the ${d.event} delivery of ${formatTime(d.created_at)}` })
              }</td></tr>`
            )
          }</tbody></table></div>`
      }`
    })
  })

const field = (fields: URLSearchParams, name: string) => (fields.get(name) ?? "").trim()

const create = HttpRouter.add("POST", "/-/orgs/:slug/webhooks", pageRoute((session) =>
  Effect.gen(function*() {
    const slug = yield* slugParam
    return yield* formWrite(
      session,
      (fields) => {
        const secret = fields.get("secret") ?? ""
        return {
          method: "POST",
          path: hooksApi(slug, field(fields, "repo")),
          body: { url: field(fields, "url"), events: fields.getAll("events"), ...(secret === "" ? {} : { secret }) }
        }
      },
      orgHref(slug, "/webhooks"),
      (notice) => listPage(session, slug, notice)
    )
  })
))

const remove = HttpRouter.add("POST", "/-/orgs/:slug/webhooks/:repo/:id/delete", pageRoute((session) =>
  Effect.gen(function*() {
    const slug = yield* slugParam
    const params = yield* HttpRouter.params
    return yield* formWrite(
      session,
      () => ({ method: "DELETE", path: hooksApi(slug, params.repo ?? "", `/${encodeURIComponent(params.id ?? "")}`) }),
      orgHref(slug, "/webhooks"),
      (notice) => listPage(session, slug, notice)
    )
  })
))

const redeliver = HttpRouter.add("POST", "/-/orgs/:slug/webhooks/:repo/:id/deliveries/:delivery/redeliver", pageRoute((session) =>
  Effect.gen(function*() {
    const slug = yield* slugParam
    const params = yield* HttpRouter.params
    const back = hookHref(slug, params.repo ?? "", params.id ?? "")
    return yield* formWrite(
      session,
      () => ({
        method: "POST",
        path: hooksApi(slug, params.repo ?? "", `/${encodeURIComponent(params.id ?? "")}/deliveries/${encodeURIComponent(params.delivery ?? "")}/redeliver`)
      }),
      back,
      (notice) => hookPage(session, notice)
    )
  })
))

export const WebhookPages = Layer.mergeAll(
  HttpRouter.add("GET", "/-/orgs/:slug/webhooks", pageRoute((session) => Effect.flatMap(slugParam, (slug) => listPage(session, slug)))),
  HttpRouter.add("GET", "/-/orgs/:slug/webhooks/:repo/:id", pageRoute((session) => hookPage(session))),
  create,
  remove,
  redeliver
)
