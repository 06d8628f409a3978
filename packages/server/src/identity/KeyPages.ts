/**
 * Personal settings: API keys (`/-/settings/keys`). The list is read as `GET /api-keys` reads it
 * (Identity.listApiKeys); creating and revoking post to the API's own endpoints (`web/Forms.ts`), so
 * the secret is made, hashed and audited there. A new key is shown once, on a `no-store` page.
 */
import { ApiErrors } from "@grove/api"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { Identity } from "../access/Identity.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { apiRefusal, callApi, formWrite, idempotencyField, type Notice, submittedForm } from "../web/Forms.ts"
import { csrfField, layout } from "../web/Layout.ts"
import { htmlResponse, pageRoute } from "../web/Page.ts"
import { formatTime, html } from "../web/Render.ts"
import type { PageSession } from "../web/Session.ts"

const KEYS = "/-/settings/keys"

const signedIn = (session: PageSession) =>
  session.user === undefined
    ? Effect.fail(new ApiErrors.Unauthorized({ error: "Sign in to manage your API keys.", code: "unauthenticated" }))
    : Effect.succeed(session.user)

const keysPage = (session: PageSession, notice?: Notice) =>
  Effect.gen(function*() {
    const user = yield* signedIn(session)
    const identity = yield* Identity
    const keys = (yield* dbUnavailable(identity.listApiKeys(user.id, { limit: 200 }))).map((keyed) => keyed.row)
    return yield* htmlResponse(layout({
      title: "API keys",
      session,
      crumbs: [{ label: "Settings" }, { label: "API keys" }],
      body: html`<h1>API keys</h1>
${notice?.body ?? null}
<p>Keys let scripts and other clients act as you: send one as <code>Authorization: Bearer KEY</code>.</p>
${
        keys.length === 0 ? html`<p class="muted">You have no API keys.</p>` : html`<div class="box"><table class="list"><caption class="skip">Your API keys</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Scope</th><th scope="col" class="hide-narrow">Created</th><th scope="col" class="hide-narrow">Last used</th><th scope="col"><span class="skip">Actions</span></th></tr></thead><tbody>${
          keys.map((key) => html`<tr><td>${key.name}<div class="muted mono">${key.prefix}…</div></td><td>${key.scope}${key.repo === undefined ? null : html` (${key.repo})`}</td>
<td class="hide-narrow muted">${formatTime(key.createdAt)}</td><td class="hide-narrow muted">${key.lastUsedAt === undefined ? "never" : formatTime(key.lastUsedAt)}</td>
<td><form method="post" action=${`${KEYS}/${encodeURIComponent(key.id)}/revoke`}>${csrfField(session)}<button type="submit" class="danger" aria-label=${`Revoke ${key.name}`}>Revoke</button></form></td></tr>`)
        }</tbody></table></div>`
      }
<h2>New key</h2>
<form method="post" action=${KEYS} class="narrow">${csrfField(session)}${idempotencyField()}
<label for="key-name">Name</label><input type="text" id="key-name" name="name" required maxlength="100" />
<label for="key-scope">Scope</label><select id="key-scope" name="scope"><option value="full">full (read and write)</option><option value="read">read</option></select>
<div class="actions"><button type="submit" class="primary">Create key</button></div></form>`
    }), { status: notice?.status ?? 200, cache: notice === undefined ? "private" : "no-store" })
  })

const list = HttpRouter.add("GET", KEYS, pageRoute((session) => keysPage(session)))

const create = HttpRouter.add("POST", KEYS, pageRoute((session) =>
  Effect.gen(function*() {
    yield* signedIn(session)
    const fields = yield* submittedForm(session)
    const answer = yield* callApi(session, "POST", "/api-keys", {
      body: { name: (fields.get("name") ?? "").trim(), scope: fields.get("scope") === "read" ? "read" : "full" },
      idempotencyKey: fields.get("idem")
    })
    if (answer.status !== 201 && answer.status !== 200) return yield* keysPage(session, apiRefusal(answer))
    return yield* keysPage(session, {
      status: 201,
      body: html`<div class="notice ok" role="alert"><p>Your new key <strong>${String(answer.body["name"] ?? "")}</strong>. Copy it now: it is not shown again.</p>
<p class="secret" id="new-key">${String(answer.body["key"] ?? "")}</p></div>`
    })
  })
))

const revoke = HttpRouter.add("POST", `${KEYS}/:id/revoke`, pageRoute((session) =>
  Effect.gen(function*() {
    yield* signedIn(session)
    const params = yield* HttpRouter.params
    return yield* formWrite(session, () => ({ method: "DELETE", path: `/api-keys/${encodeURIComponent(params.id ?? "")}` }), KEYS, (notice) => keysPage(session, notice))
  })
))

export const KeyPages = Layer.mergeAll(list, create, revoke)
