/**
 * The organization's audit log as a page (`/-/orgs/{slug}/audit`): who did what to which target,
 * newest first, with the filters `GET /api/orgs/{slug}/audit` has (actor, action, since) and pages
 * of 50 by the same keyset (`?cursor=` is the last entry's id). For owners and admins, as the API
 * decides it (`pageOrganization` with "admin"): a non-member gets the 404 page, a plain member 403.
 * Read through the API's own read service (AuditLog); filters are checked by the API's own rules.
 */
import { isSince, sinceInstant } from "@grove/api"
import { Names } from "@grove/core"
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import { dbUnavailable } from "../http/Failures.ts"
import { type Notice } from "../web/Forms.ts"
import { orgHref, orgPage, pageOrganization, slugParam } from "../web/OrgFrame.ts"
import { pageRoute } from "../web/Page.ts"
import { formatTime, html } from "../web/Render.ts"
import type { PageSession } from "../web/Session.ts"
import { type AuditFilter, AuditLog, type AuditRecord, isEntryId } from "./AuditLog.ts"

const PAGE = 50

/** An actor or action filter as the API takes it: 1-200 code points, no control characters. */
const fitsFilter = (value: string) => [...value].length <= 200 && !Names.hasControlCharacters(value)

/** A browser's `datetime-local` value (no offset) is read as UTC, as the page says; ISO 8601 with an offset as it is. */
const sinceOf = (value: string): string | undefined => {
  const local = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/.test(value) ? `${value}Z` : value
  return isSince(local) ? sinceInstant(local) : undefined
}

export interface AuditQuery {
  readonly actor: string
  readonly action: string
  readonly since: string
  readonly cursor: string
}

/** The query's filters for the read service, or what is wrong with one of them. */
export const parseAuditQuery = (query: AuditQuery): { readonly filter: AuditFilter; readonly after?: ReadonlyArray<string> } | { readonly problem: string } => {
  if (!fitsFilter(query.actor) || !fitsFilter(query.action)) return { problem: "Actor and action must be at most 200 characters, without control characters." }
  const since = query.since === "" ? undefined : sinceOf(query.since)
  if (query.since !== "" && since === undefined) return { problem: "Since must be a date and time, e.g. 2026-11-24T16:00 (UTC) or 2026-11-24T16:00:00+01:00." }
  if (query.cursor !== "" && !isEntryId(query.cursor)) return { problem: "That page address is not one this log answered with; start again from the first page." }
  return {
    filter: { actor: query.actor === "" ? undefined : query.actor, action: query.action === "" ? undefined : query.action, since },
    ...(query.cursor === "" ? {} : { after: [query.cursor] })
  }
}

const details = (entry: AuditRecord) => {
  const text = JSON.stringify(entry.details)
  return text === "{}" ? null : html`<code class="audit-details">${text}</code>`
}

const auditPage = (session: PageSession, slug: string) =>
  Effect.gen(function*() {
    const org = yield* pageOrganization(session, slug, "admin")
    const request = yield* HttpServerRequest.HttpServerRequest
    const params = new URL(request.url, "http://x").searchParams
    const query: AuditQuery = {
      actor: (params.get("actor") ?? "").trim(),
      action: (params.get("action") ?? "").trim(),
      since: (params.get("since") ?? "").trim(),
      cursor: params.get("cursor") ?? ""
    }
    const parsed = parseAuditQuery(query)
    const notice: Notice | undefined = "problem" in parsed
      ? { status: 400, body: html`<p class="notice bad" role="alert">${parsed.problem}</p>` }
      : undefined
    const rows = "problem" in parsed
      ? []
      : yield* dbUnavailable((yield* AuditLog).list(org.id, parsed.filter, { limit: PAGE, after: parsed.after }))
    const entries = rows.slice(0, PAGE)
    const filtered = query.actor !== "" || query.action !== "" || query.since !== ""
    const address = (cursor?: string) => {
      const next = new URLSearchParams()
      for (const name of ["actor", "action", "since"] as const) if (query[name] !== "") next.set(name, query[name])
      if (cursor !== undefined) next.set("cursor", cursor)
      const text = next.toString()
      return orgHref(org.slug, `/audit${text === "" ? "" : `?${text}`}`)
    }
    const nextCursor = rows.length > PAGE ? String(entries[entries.length - 1]!.key[0]) : undefined
    return yield* orgPage({
      session,
      org,
      tab: "audit",
      title: "Audit log",
      notice,
      body: html`<form method="get" action=${orgHref(org.slug, "/audit")} class="filters" role="search" aria-label="Filter the audit log">
<div><label for="audit-actor">Actor</label><input type="text" id="audit-actor" name="actor" value=${query.actor} maxlength="200" placeholder="user name" /></div>
<div><label for="audit-action">Action</label><input type="text" id="audit-action" name="action" value=${query.action} maxlength="200" placeholder="e.g. repo.create" /></div>
<div><label for="audit-since">Since (UTC)</label><input type="datetime-local" id="audit-since" name="since" value=${query.since} /></div>
<div class="actions"><button type="submit" class="primary">Filter</button>${filtered ? html`<a href=${orgHref(org.slug, "/audit")}>Clear filters</a>` : null}</div>
</form>
${
        entries.length === 0
          ? html`<p class="muted">${filtered ? "No entries match these filters." : "No entries yet."}</p>`
          : html`<div class="box"><table class="list audit"><caption class="skip">Audit log entries, newest first</caption>
<thead><tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col" class="hide-narrow">Details</th></tr></thead>
<tbody>${
            entries.map(({ row }) =>
              html`<tr><td class="muted nowrap">${formatTime(row.createdAt)}</td><td>${row.actor}</td><td class="mono">${row.action}</td><td class="wrap">${row.target}</td><td class="hide-narrow wrap">${
                details(row)
              }</td></tr>`
            )
          }</tbody></table></div>`
      }
<nav class="actions" aria-label="Audit log pages">${query.cursor === "" ? null : html`<a href=${address()}>Newest entries</a>`}${
        nextCursor === undefined ? null : html`<a href=${address(nextCursor)} rel="next">Older entries</a>`
      }</nav>`
    })
  })

export const AuditPages = Layer.mergeAll(
  HttpRouter.add("GET", "/-/orgs/:slug/audit", pageRoute((session) => Effect.flatMap(slugParam, (slug) => auditPage(session, slug))))
)
