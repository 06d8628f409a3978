/**
 * The head of every organization page (`/-/orgs/{slug}/...`): breadcrumbs, name, the viewer's role
 * and the tabs. The organization is loaded as the API loads it (`Authorizer.organization` with the
 * page's caller), so a non-member gets the same 404 page as for a missing organization, and a tab
 * shows only when its page would let the viewer in (members read; admins and owners manage).
 */
import { Access } from "@grove/core"
import { Effect } from "effect"
import { HttpRouter } from "effect/http"
import { Authorizer } from "../access/Authorizer.ts"
import type { Organization } from "../access/Organizations.ts"
import { dbUnavailable } from "../http/Failures.ts"
import type { Notice } from "./Forms.ts"
import { type Crumb, layout } from "./Layout.ts"
import { htmlResponse } from "./Page.ts"
import { html, type Node } from "./Render.ts"
import type { PageSession } from "./Session.ts"

export type OrgShape = Organization & { readonly callerRole: Access.Role | undefined }

export type OrgTab = "overview" | "members" | "groups" | "service-accounts" | "webhooks" | "secrets" | "audit" | "settings"

/** `/-/orgs/{slug}` with the slug percent-encoded; `rest` ("/members", ...) is appended as given. */
export const orgHref = (slug: string, rest = "") => `/-/orgs/${encodeURIComponent(slug)}${rest}`

/** `/api/orgs/{slug}{rest}` as `callApi` (web/Forms.ts) takes it. */
export const orgApi = (slug: string, rest = "") => `/orgs/${encodeURIComponent(slug)}${rest}`

/** The `:slug` of an organization page's route. */
export const slugParam = Effect.map(HttpRouter.params, (params) => params.slug ?? "")

/** The viewer's organizations (signed in). */
export const ORGS_HREF = "/-/orgs"

/** Each tab: its label, its address under the organization, and the least action its page needs. */
export const ORG_TABS: ReadonlyArray<{ readonly tab: OrgTab; readonly label: string; readonly path: string; readonly needs: "read" | "admin" }> = [
  { tab: "overview", label: "Overview", path: "", needs: "read" },
  { tab: "members", label: "Members", path: "/members", needs: "read" },
  { tab: "groups", label: "Groups", path: "/groups", needs: "read" },
  { tab: "service-accounts", label: "Service accounts", path: "/service-accounts", needs: "read" },
  { tab: "webhooks", label: "Webhooks", path: "/webhooks", needs: "admin" },
  { tab: "secrets", label: "CI secrets", path: "/secrets", needs: "admin" },
  { tab: "audit", label: "Audit log", path: "/audit", needs: "admin" },
  { tab: "settings", label: "Settings", path: "/settings", needs: "admin" }
]

export const orgTabHref = (slug: string, tab: OrgTab) => orgHref(slug, ORG_TABS.find((t) => t.tab === tab)?.path ?? "")

/** Whether the viewer manages the organization (admin or owner; an instance admin counts as owner), as the API decides it. */
export const managesOrg = (session: PageSession, org: Pick<OrgShape, "callerRole">): boolean =>
  Access.holdsRole(session.caller.principal, org.callerRole, "admin")

/** Whether the viewer is an owner (or instance admin): only an owner grants or changes the owner role. */
export const ownsOrg = (session: PageSession, org: Pick<OrgShape, "callerRole">): boolean =>
  Access.holdsRole(session.caller.principal, org.callerRole, "owner")

/**
 * The organization of `/-/orgs/:slug`, for `action` ("read" for members, "admin" for the manage-only
 * pages), decided exactly as the API's `authorizer.organization`: missing and hidden are both 404.
 */
export const pageOrganization = (session: PageSession, slug: string, action: Access.Action = "read") =>
  Effect.gen(function*() {
    const authorizer = yield* Authorizer
    const org: OrgShape = yield* dbUnavailable(authorizer.organization(session.caller, slug, action))
    return org
  })

export const orgCrumbs = (org: Pick<OrgShape, "slug">, more: ReadonlyArray<Crumb> = []): ReadonlyArray<Crumb> => [
  { label: "Organizations", href: ORGS_HREF },
  { label: org.slug, href: orgHref(org.slug) },
  ...more
]

export const orgHeader = (session: PageSession, org: OrgShape, current: OrgTab, extra?: Node): Node => {
  const manages = managesOrg(session, org)
  const role = session.caller.principal.kind === "user" && session.caller.principal.siteAdmin && org.callerRole === undefined
    ? "instance admin"
    : org.callerRole
  return html`<h1>${org.name}</h1>
<div class="meta"><span class="mono">${org.slug}</span>${org.personal ? html`<span class="badge">Personal</span>` : null}${
    role === undefined ? null : html`<span class="badge">You: ${role}</span>`
  }${extra}</div>
${org.description === null ? null : html`<p>${org.description}</p>`}
<nav class="tabs org-tabs" aria-label="Organization">${
    ORG_TABS.filter((t) => t.needs === "read" || manages).map((t) =>
      html`<a href=${orgHref(org.slug, t.path)} aria-current=${t.tab === current ? "page" : undefined}>${t.label}</a>`
    )
  }</nav>`
}

/**
 * An organization page: the frame, then a form's notice (a refusal or a secret shown once), then the
 * body. `no-store` when the page shows a secret.
 */
export const orgPage = (input: {
  readonly session: PageSession
  readonly org: OrgShape
  readonly tab: OrgTab
  readonly title: string
  readonly body: Node
  readonly crumbs?: ReadonlyArray<Crumb> | undefined
  readonly notice?: Notice | undefined
  readonly cache?: "private" | "no-store" | undefined
}) =>
  htmlResponse(layout({
    title: `${input.title} · ${input.org.name}`,
    session: input.session,
    crumbs: orgCrumbs(input.org, input.crumbs ?? (input.tab === "overview" ? [] : [{ label: input.title }])),
    body: html`${orgHeader(input.session, input.org, input.tab)}${input.notice?.body ?? null}${input.body}`
  }), { status: input.notice?.status ?? 200, cache: input.cache ?? "private" })
