/**
 * An organization's people: members and their roles (`/-/orgs/{slug}/members`) and groups
 * (`/-/orgs/{slug}/groups`). Members read both lists, as `GET /orgs/{slug}/members` and `/groups`
 * allow; owners and admins also get the forms (add, change a role, remove; create a group, add or
 * remove its members, delete it), each posting to the API's own endpoint, which decides (only an
 * owner grants or changes the owner role; a refusal is shown on the page with the API's words).
 */
import type { Access } from "@grove/core"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { Organizations } from "../access/Organizations.ts"
import { dbUnavailable } from "../http/Failures.ts"
import { type ApiRequest, formWrite, idempotencyField, type Notice, postButton } from "../web/Forms.ts"
import { csrfField } from "../web/Layout.ts"
import { managesOrg, orgApi, orgHref, orgPage, ownsOrg, pageOrganization, slugParam } from "../web/OrgFrame.ts"
import { pageRoute } from "../web/Page.ts"
import { formatTime, html, type Node } from "../web/Render.ts"
import type { PageSession } from "../web/Session.ts"

const SHOWN = 500

const roleOptions = (grantsOwner: boolean, selected: Access.Role): Node =>
  (["member", "admin", "owner"] as const).filter((role) => grantsOwner || role !== "owner" || selected === "owner").map((role) =>
    html`<option value=${role} selected=${role === selected}>${role}</option>`
  )

const membersPage = (session: PageSession, slug: string, notice?: Notice) =>
  Effect.gen(function*() {
    const org = yield* pageOrganization(session, slug)
    const members = (yield* dbUnavailable((yield* Organizations).listMembers(org.id, { limit: SHOWN }))).map((keyed) => keyed.row)
    const manages = managesOrg(session, org)
    const owns = ownsOrg(session, org)
    const memberHref = (username: string, action: string) => orgHref(org.slug, `/members/${encodeURIComponent(username)}/${action}`)
    // An admin may not touch an owner's membership (the API refuses it); the page does not offer it.
    const managesRow = (role: Access.Role) => manages && (owns || role !== "owner")
    return yield* orgPage({
      session,
      org,
      tab: "members",
      title: "Members",
      notice,
      body: html`<div class="box"><table class="list middle"><caption class="skip">Members</caption>
<thead><tr><th scope="col">Member</th><th scope="col">Role</th><th scope="col" class="hide-narrow">Joined</th>${
        manages ? html`<th scope="col"><span class="skip">Actions</span></th>` : null
      }</tr></thead><tbody>${
        members.map((m) =>
          html`<tr><td>${m.username}</td><td>${
            managesRow(m.role)
              ? html`<form method="post" action=${memberHref(m.username, "role")} class="inline">${csrfField(session)}${idempotencyField()}
<label class="skip" for=${`role-${m.username}`}>Role of ${m.username}</label><select id=${`role-${m.username}`} name="role">${roleOptions(owns, m.role)}</select>
<button type="submit" aria-label=${`Change the role of ${m.username}`}>Change</button></form>`
              : m.role
          }</td><td class="hide-narrow muted">${formatTime(m.created_at)}</td>${
            manages
              ? html`<td>${managesRow(m.role) ? postButton(session, memberHref(m.username, "remove"), "Remove", { danger: true, ariaLabel: `Remove ${m.username}` }) : null}</td>`
              : null
          }</tr>`
        )
      }</tbody></table></div>${
        manages
          ? html`<h2>Add a member</h2>
<form method="post" action=${orgHref(org.slug, "/members")} class="narrow">${csrfField(session)}${idempotencyField()}
<label for="member-username">User name</label><input type="text" id="member-username" name="username" required maxlength="39" autocomplete="off" />
<label for="member-role">Role</label><select id="member-role" name="role">${roleOptions(owns, "member")}</select>
<div class="actions"><button type="submit" class="primary">Add member</button></div></form>`
          : html`<p class="muted">Owners and admins manage the members.</p>`
      }`
    })
  })

const groupsPage = (session: PageSession, slug: string, notice?: Notice) =>
  Effect.gen(function*() {
    const org = yield* pageOrganization(session, slug)
    const groups = (yield* dbUnavailable((yield* Organizations).listGroups(org.id, { limit: SHOWN }))).map((keyed) => keyed.row)
    const manages = managesOrg(session, org)
    const groupHref = (group: string, rest = "") => orgHref(org.slug, `/groups/${encodeURIComponent(group)}${rest}`)
    return yield* orgPage({
      session,
      org,
      tab: "groups",
      title: "Groups",
      notice,
      body: html`${groups.length === 0 ? html`<p class="muted">No groups yet.</p>` : null}${
        groups.map((g) =>
          html`<section class="box" aria-labelledby=${`group-${g.slug}`}><header><h2 id=${`group-${g.slug}`}>${g.slug}</h2>${
            g.description === undefined ? null : html`<span class="muted">${g.description}</span>`
          }<span class="spacer"></span>${
            manages ? postButton(session, groupHref(g.slug, "/delete"), "Delete group", { danger: true, ariaLabel: `Delete group ${g.slug}` }) : null
          }</header>
${
            g.members.length === 0 ? html`<p class="pad muted">No members.</p>` : html`<ul class="people">${
              g.members.map((username) =>
                html`<li><span>${username}</span>${
                  manages
                    ? postButton(session, groupHref(g.slug, `/members/${encodeURIComponent(username)}/remove`), "Remove", {
                      danger: true,
                      ariaLabel: `Remove ${username} from ${g.slug}`
                    })
                    : null
                }</li>`
              )
            }</ul>`
          }${
            manages
              ? html`<form method="post" action=${groupHref(g.slug, "/members")} class="pad row">${csrfField(session)}${idempotencyField()}
<label class="skip" for=${`add-${g.slug}`}>User name to add to ${g.slug}</label><input type="text" id=${`add-${g.slug}`} name="username" required maxlength="39" placeholder="user name" autocomplete="off" />
<button type="submit" aria-label=${`Add to ${g.slug}`}>Add</button></form>`
              : null
          }</section>`
        )
      }${
        manages
          ? html`<h2>New group</h2>
<form method="post" action=${orgHref(org.slug, "/groups")} class="narrow">${csrfField(session)}${idempotencyField()}
<label for="group-slug">Short name</label><input type="text" id="group-slug" name="slug" required maxlength="39" autocomplete="off" />
<label for="group-description">Description</label><input type="text" id="group-description" name="description" maxlength="2000" />
<div class="actions"><button type="submit" class="primary">Create group</button></div></form>`
          : html`<p class="muted">Owners and admins manage the groups.</p>`
      }`
    })
  })

/** A form of the members or groups page: to its API request, back to that page, or the page again with the refusal. */
const write = (
  path: string,
  page: (session: PageSession, slug: string, notice?: Notice) => ReturnType<typeof membersPage>,
  back: string,
  request: (slug: string, params: Readonly<Record<string, string | undefined>>, fields: URLSearchParams) => ApiRequest
) =>
  HttpRouter.add("POST", `/-/orgs/:slug${path}`, pageRoute((session) =>
    Effect.gen(function*() {
      const slug = yield* slugParam
      const params = yield* HttpRouter.params
      return yield* formWrite(session, (fields) => request(slug, params, fields), orgHref(slug, back), (notice) => page(session, slug, notice))
    })
  ))

const seg = (value: string | undefined) => encodeURIComponent(value ?? "")
const field = (fields: URLSearchParams, name: string) => (fields.get(name) ?? "").trim()

export const OrgPeoplePages = Layer.mergeAll(
  HttpRouter.add("GET", "/-/orgs/:slug/members", pageRoute((session) => Effect.flatMap(slugParam, (slug) => membersPage(session, slug)))),
  HttpRouter.add("GET", "/-/orgs/:slug/groups", pageRoute((session) => Effect.flatMap(slugParam, (slug) => groupsPage(session, slug)))),
  write("/members", membersPage, "/members", (slug, _, fields) => ({
    method: "POST",
    path: orgApi(slug, "/members"),
    body: { username: field(fields, "username"), role: field(fields, "role") || "member" }
  })),
  write("/members/:username/role", membersPage, "/members", (slug, params, fields) => ({
    method: "PATCH",
    path: orgApi(slug, `/members/${seg(params.username)}`),
    body: { role: field(fields, "role") }
  })),
  write("/members/:username/remove", membersPage, "/members", (slug, params) => ({ method: "DELETE", path: orgApi(slug, `/members/${seg(params.username)}`) })),
  write("/groups", groupsPage, "/groups", (slug, _, fields) => {
    const description = field(fields, "description")
    return { method: "POST", path: orgApi(slug, "/groups"), body: { slug: field(fields, "slug"), ...(description === "" ? {} : { description }) } }
  }),
  write("/groups/:group/delete", groupsPage, "/groups", (slug, params) => ({ method: "DELETE", path: orgApi(slug, `/groups/${seg(params.group)}`) })),
  write("/groups/:group/members", groupsPage, "/groups", (slug, params, fields) => ({
    method: "POST",
    path: orgApi(slug, `/groups/${seg(params.group)}/members`),
    body: { username: field(fields, "username") }
  })),
  write("/groups/:group/members/:username/remove", groupsPage, "/groups", (slug, params) => ({
    method: "DELETE",
    path: orgApi(slug, `/groups/${seg(params.group)}/members/${seg(params.username)}`)
  }))
)
