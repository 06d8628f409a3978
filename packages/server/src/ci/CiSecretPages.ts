/**
 * An organization's CI secrets (`/-/orgs/{slug}/secrets`): per repository, the secrets' names and
 * who set them when, never a value (the read is `CiRuns.secretNames`, the one `GET
 * /api/{owner}/{name}/ci/secrets` answers with). Setting one (the value in a write-only password
 * field) and deleting one post to the API's own endpoints (`PUT .../ci/secrets`, `DELETE
 * .../ci/secrets/{name}`), which decide; a refusal shows on this page with the API's words. For the
 * organization's owners and admins, as its other management pages.
 */
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { dbUnavailable } from "../http/Failures.ts"
import { formWrite, idempotencyField, type Notice, postButton } from "../web/Forms.ts"
import { csrfField } from "../web/Layout.ts"
import { orgHref, orgPage, pageOrganization, slugParam } from "../web/OrgFrame.ts"
import { orgRepositories, repositoryField } from "../web/OrgRepositories.ts"
import { pageRoute } from "../web/Page.ts"
import { formatTime, html } from "../web/Render.ts"
import type { PageSession } from "../web/Session.ts"
import { CiRuns } from "./CiRuns.ts"

const secretsPage = (session: PageSession, slug: string, notice?: Notice) =>
  Effect.gen(function*() {
    const org = yield* pageOrganization(session, slug, "admin")
    const runs = yield* CiRuns
    const repos = yield* orgRepositories(session, org)
    const sections = yield* Effect.forEach(repos, (repo) =>
      Effect.map(dbUnavailable(runs.secretNames(repo.id)), (secrets) => ({ repo, secrets })))
    const deleteHref = (repo: string, name: string) => orgHref(org.slug, `/secrets/${encodeURIComponent(repo)}/${encodeURIComponent(name)}/delete`)
    return yield* orgPage({
      session,
      org,
      tab: "secrets",
      title: "CI secrets",
      notice,
      body: html`<p class="muted">Steps of a repository's workflows get its secrets as environment variables, masked in their logs. Values are never shown again once set.</p>
${repos.length === 0 ? html`<p class="muted">No repositories yet.</p>` : null}${
        sections.map(({ repo, secrets }) =>
          html`<section class="box" aria-labelledby=${`secrets-${repo.name}`}><header><h2 id=${`secrets-${repo.name}`}>${repo.owner}/${repo.name}</h2></header>${
            secrets.length === 0
              ? html`<p class="pad muted">No secrets.</p>`
              : html`<table class="list"><caption class="skip">Secrets of ${repo.name}</caption>
<thead><tr><th scope="col">Name</th><th scope="col" class="hide-narrow">Set by</th><th scope="col" class="hide-narrow">Updated</th><th scope="col"><span class="skip">Actions</span></th></tr></thead>
<tbody>${
                secrets.map((secret) =>
                  html`<tr><td class="mono">${secret.name}</td><td class="hide-narrow">${secret.updated_by}</td><td class="hide-narrow muted">${formatTime(secret.updated_at)}</td><td>${
                    postButton(session, deleteHref(repo.name, secret.name), "Delete", { danger: true, ariaLabel: `Delete ${secret.name} of ${repo.name}` })
                  }</td></tr>`
                )
              }</tbody></table>`
          }</section>`
        )
      }${
        repos.length === 0 ? null : html`<h2>Set a secret</h2>
<form method="post" action=${orgHref(org.slug, "/secrets")} class="narrow">${csrfField(session)}${idempotencyField()}
${repositoryField("secret-repo", repos)}
<label for="secret-name">Name</label><input type="text" id="secret-name" name="name" required maxlength="100" autocomplete="off" aria-describedby="secret-name-hint" />
<p class="muted" id="secret-name-hint">An environment variable name (letters, digits and _). Setting an existing name replaces its value.</p>
<label for="secret-value">Value</label><input type="password" id="secret-value" name="value" required autocomplete="new-password" />
<div class="actions"><button type="submit" class="primary">Set secret</button></div></form>`
      }`
    })
  })

const field = (fields: URLSearchParams, name: string) => (fields.get(name) ?? "").trim()
const repoApi = (slug: string, repo: string, rest: string) => `/${encodeURIComponent(slug)}/${encodeURIComponent(repo)}/ci/secrets${rest}`

const setSecret = HttpRouter.add("POST", "/-/orgs/:slug/secrets", pageRoute((session) =>
  Effect.gen(function*() {
    const slug = yield* slugParam
    return yield* formWrite(
      session,
      // The value as typed (spaces are part of a secret); the API checks it and the name.
      (fields) => ({ method: "PUT", path: repoApi(slug, field(fields, "repo"), ""), body: { name: field(fields, "name"), value: fields.get("value") ?? "" } }),
      orgHref(slug, "/secrets"),
      (notice) => secretsPage(session, slug, notice)
    )
  })
))

const deleteSecret = HttpRouter.add("POST", "/-/orgs/:slug/secrets/:repo/:secret/delete", pageRoute((session) =>
  Effect.gen(function*() {
    const slug = yield* slugParam
    const params = yield* HttpRouter.params
    return yield* formWrite(
      session,
      () => ({ method: "DELETE", path: repoApi(slug, params.repo ?? "", `/${encodeURIComponent(params.secret ?? "")}`) }),
      orgHref(slug, "/secrets"),
      (notice) => secretsPage(session, slug, notice)
    )
  })
))

export const CiSecretPages = Layer.mergeAll(
  HttpRouter.add("GET", "/-/orgs/:slug/secrets", pageRoute((session) => Effect.flatMap(slugParam, (slug) => secretsPage(session, slug)))),
  setSecret,
  deleteSecret
)
