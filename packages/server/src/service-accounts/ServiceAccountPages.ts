/**
 * An organization's service accounts (`/-/orgs/{slug}/service-accounts`): members see the list, as
 * `GET /orgs/{slug}/service-accounts` allows; owners and admins create accounts and open one
 * (`/service-accounts/{name}`: its keys, as `GET .../keys` needs the admin role) to create a key,
 * revoke one, disable or delete the account. Every change posts to the API's own endpoint
 * (`web/Forms.ts`): the secret is made, hashed and audited there, and a new key is shown once, on
 * a `no-store` page, as on the personal keys page.
 */
import { ApiErrors } from "@grove/api"
import { Access } from "@grove/core"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { dbUnavailable } from "../http/Failures.ts"
import { type ApiRequest, apiRefusal, callApi, formWrite, idempotencyField, type Notice, postButton, submittedForm } from "../web/Forms.ts"
import { csrfField } from "../web/Layout.ts"
import { managesOrg, orgApi, orgHref, orgPage, type OrgShape, ownsOrg, pageOrganization, slugParam } from "../web/OrgFrame.ts"
import { pageRoute } from "../web/Page.ts"
import { formatTime, html } from "../web/Render.ts"
import type { PageSession } from "../web/Session.ts"
import { ServiceAccounts } from "./ServiceAccounts.ts"

const SHOWN = 500

const accountsHref = (org: Pick<OrgShape, "slug">, rest = "") => orgHref(org.slug, `/service-accounts${rest}`)
const accountHref = (org: Pick<OrgShape, "slug">, name: string, rest = "") => accountsHref(org, `/${encodeURIComponent(name)}${rest}`)

const listPage = (session: PageSession, slug: string, notice?: Notice) =>
  Effect.gen(function*() {
    const org = yield* pageOrganization(session, slug)
    const accounts = (yield* dbUnavailable((yield* ServiceAccounts).list(org.id, org.slug, { limit: SHOWN }))).map((keyed) => keyed.row)
    const manages = managesOrg(session, org)
    return yield* orgPage({
      session,
      org,
      tab: "service-accounts",
      title: "Service accounts",
      notice,
      body: html`<p>Service accounts act for scripts and CI with keys of their own, scoped and revocable.</p>${
        accounts.length === 0 ? html`<p class="muted">No service accounts yet.</p>` : html`<div class="box"><table class="list"><caption class="skip">Service accounts</caption>
<thead><tr><th scope="col">Account</th><th scope="col">State</th><th scope="col" class="hide-narrow">Created</th></tr></thead><tbody>${
          accounts.map((a) =>
            html`<tr><td>${manages ? html`<a href=${accountHref(org, a.name)}>${a.name}</a>` : a.name}${
              a.display_name === undefined ? null : html`<div class="muted">${a.display_name}</div>`
            }</td><td>${a.disabled ? html`<span class="badge bad">Disabled</span>` : html`<span class="badge ok">Active</span>`}</td>
<td class="hide-narrow muted">${formatTime(a.created_at)}</td></tr>`
          )
        }</tbody></table></div>`
      }${
        manages
          ? html`<h2>New service account</h2>
<form method="post" action=${accountsHref(org)} class="narrow">${csrfField(session)}${idempotencyField()}
<label for="account-name">Short name</label><input type="text" id="account-name" name="name" required maxlength="39" autocomplete="off" />
<label for="account-display">Display name</label><input type="text" id="account-display" name="display_name" maxlength="100" />
<div class="actions"><button type="submit" class="primary">Create service account</button></div></form>`
          : html`<p class="muted">Owners and admins manage service accounts and their keys.</p>`
      }`
    })
  })

const accountPage = (session: PageSession, slug: string, name: string, notice?: Notice) =>
  Effect.gen(function*() {
    const org = yield* pageOrganization(session, slug, "admin")
    const accounts = yield* ServiceAccounts
    const found = yield* dbUnavailable(accounts.get(org.id, org.slug, name))
    if (found === undefined) return yield* new ApiErrors.NotFound({ error: `service account ${name} not found`, code: "not_found" })
    const { account } = found
    const keys = (yield* dbUnavailable(accounts.keys(found.id, { limit: SHOWN }))).map((keyed) => keyed.row)
    // The scopes this viewer may put in a key (`release` only from an owner); the API decides again.
    const grantable = Access.grantableScopes(ownsOrg(session, org) ? "owner" : "admin")
    return yield* orgPage({
      session,
      org,
      tab: "service-accounts",
      title: account.name,
      crumbs: [{ label: "Service accounts", href: accountsHref(org) }, { label: account.name }],
      notice,
      cache: notice?.status === 201 ? "no-store" : "private",
      body: html`<h2>${account.display_name ?? account.name} ${
        account.disabled ? html`<span class="badge bad">Disabled</span>` : html`<span class="badge ok">Active</span>`
      }</h2>
<div class="actions">${
        postButton(session, accountHref(org, account.name, "/state"), account.disabled ? "Enable" : "Disable", { fields: { disabled: account.disabled ? "false" : "true" } })
      }${postButton(session, accountHref(org, account.name, "/delete"), "Delete account", { danger: true })}</div>
<h2>Keys</h2>${
        keys.length === 0 ? html`<p class="muted">No keys.</p>` : html`<div class="box"><table class="list"><caption class="skip">Keys of ${account.name}</caption>
<thead><tr><th scope="col">Key</th><th scope="col">Scopes</th><th scope="col" class="hide-narrow">Created</th><th scope="col" class="hide-narrow">Last used</th><th scope="col"><span class="skip">Actions</span></th></tr></thead><tbody>${
          keys.map((k) =>
            html`<tr><td>${k.name}<div class="muted mono">${k.prefix}…</div></td><td>${k.scopes.split(",").join(", ")}</td>
<td class="hide-narrow muted">${formatTime(k.created_at)}</td><td class="hide-narrow muted">${k.last_used_at === undefined ? "never" : formatTime(k.last_used_at)}</td>
<td>${postButton(session, accountHref(org, account.name, `/keys/${encodeURIComponent(k.key_id)}/revoke`), "Revoke", { danger: true, ariaLabel: `Revoke ${k.name}` })}</td></tr>`
          )
        }</tbody></table></div>`
      }
<h2>New key</h2>
<form method="post" action=${accountHref(org, account.name, "/keys")} class="narrow">${csrfField(session)}${idempotencyField()}
<label for="key-name">Name</label><input type="text" id="key-name" name="name" required maxlength="100" />
<fieldset class="scopes"><legend>Scopes</legend>${
        grantable.map((scope) =>
          html`<label class="check"><input type="checkbox" name="scope" value=${scope} checked=${scope === "read"} /> ${scope}</label>`
        )
      }</fieldset>
<div class="actions"><button type="submit" class="primary">Create key</button></div></form>`
    })
  })

const accountParams = Effect.map(HttpRouter.params, (params) => ({ slug: params.slug ?? "", name: params.name ?? "", key: params.key ?? "" }))

/** A form of an account's page: to its API request; back to `back`, or the account's page again with the refusal. */
const accountWrite = (path: string, request: (p: { slug: string; name: string; key: string }, fields: URLSearchParams) => ApiRequest, back?: "list") =>
  HttpRouter.add("POST", `/-/orgs/:slug/service-accounts/:name${path}`, pageRoute((session) =>
    Effect.gen(function*() {
      const p = yield* accountParams
      return yield* formWrite(
        session,
        (fields) => request(p, fields),
        back === "list" ? accountsHref(p) : accountHref(p, p.name),
        (notice) => accountPage(session, p.slug, p.name, notice)
      )
    })
  ))

const accountApi = (p: { slug: string; name: string }, rest = "") => orgApi(p.slug, `/service-accounts/${encodeURIComponent(p.name)}${rest}`)

/** A new key: created through the API, its secret shown once on the account's page (`no-store`). */
const createKey = HttpRouter.add("POST", "/-/orgs/:slug/service-accounts/:name/keys", pageRoute((session) =>
  Effect.gen(function*() {
    const p = yield* accountParams
    const fields = yield* submittedForm(session)
    const answer = yield* callApi(session, "POST", accountApi(p, "/keys"), {
      body: { name: (fields.get("name") ?? "").trim(), scopes: fields.getAll("scope").join(",") },
      idempotencyKey: fields.get("idem")
    })
    if (answer.status !== 201) return yield* accountPage(session, p.slug, p.name, apiRefusal(answer))
    return yield* accountPage(session, p.slug, p.name, {
      status: 201,
      body: html`<div class="notice ok" role="alert"><p>The new key <strong>${String(answer.body["name"] ?? "")}</strong>. Copy it now: it is not shown again.</p>
<p class="secret" id="new-key">${String(answer.body["key"] ?? "")}</p></div>`
    })
  })
))

export const ServiceAccountPages = Layer.mergeAll(
  HttpRouter.add("GET", "/-/orgs/:slug/service-accounts", pageRoute((session) => Effect.flatMap(slugParam, (slug) => listPage(session, slug)))),
  HttpRouter.add("GET", "/-/orgs/:slug/service-accounts/:name", pageRoute((session) =>
    Effect.flatMap(accountParams, (p) => accountPage(session, p.slug, p.name))
  )),
  HttpRouter.add("POST", "/-/orgs/:slug/service-accounts", pageRoute((session) =>
    Effect.gen(function*() {
      const slug = yield* slugParam
      return yield* formWrite(session, (fields) => {
        const display = (fields.get("display_name") ?? "").trim()
        return { method: "POST", path: orgApi(slug, "/service-accounts"), body: { name: (fields.get("name") ?? "").trim(), ...(display === "" ? {} : { display_name: display }) } }
      }, (fields) => orgHref(slug, `/service-accounts/${encodeURIComponent((fields.get("name") ?? "").trim())}`), (notice) => listPage(session, slug, notice))
    })
  )),
  createKey,
  accountWrite("/keys/:key/revoke", (p) => ({ method: "DELETE", path: accountApi(p, `/keys/${encodeURIComponent(p.key)}`) })),
  accountWrite("/state", (p, fields) => ({ method: "PATCH", path: accountApi(p), body: { disabled: fields.get("disabled") === "true" } })),
  accountWrite("/delete", (p) => ({ method: "DELETE", path: accountApi(p) }), "list")
)
