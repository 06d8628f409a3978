import { describe, expect, it } from "@effect/vitest"
import type { Access } from "@grove/core"
import { orgHeader, orgHref, type OrgShape } from "./OrgFrame.ts"
import type { PageSession } from "./Session.ts"

const sessionOf = (siteAdmin = false): PageSession => ({
  caller: { principal: { kind: "user", userId: "u1", username: "dana", siteAdmin }, limits: { kind: "session" } },
  user: { id: "u1", username: "dana", siteAdmin },
  token: "t",
  csrfSecret: undefined
})

const orgWith = (callerRole: Access.Role | undefined): OrgShape => ({
  id: "o1",
  slug: "acme",
  name: "Acme <Corp>",
  description: null,
  personal: false,
  createdAt: new Date(0),
  callerRole
})

/** The tab labels of the rendered frame, in order. */
const tabs = (session: PageSession, org: OrgShape) =>
  [...String(orgHeader(session, org, "members")).matchAll(/<a href="[^"]*"[^>]*>([^<]+)<\/a>/g)].map((m) => m[1])

describe("OrgFrame", () => {
  it("shows members the reading tabs and managers every tab, as the API's roles decide", () => {
    const read = ["Overview", "Members", "Groups", "Service accounts"]
    const all = [...read, "Webhooks", "CI secrets", "Audit log", "Settings"]
    expect(tabs(sessionOf(), orgWith("member"))).toEqual(read)
    expect(tabs(sessionOf(), orgWith("admin"))).toEqual(all)
    expect(tabs(sessionOf(), orgWith("owner"))).toEqual(all)
    // An instance admin counts as an owner without a membership.
    expect(tabs(sessionOf(true), orgWith(undefined))).toEqual(all)
  })

  it("marks the current tab, escapes the name and encodes the slug in addresses", () => {
    const frame = String(orgHeader(sessionOf(), orgWith("member"), "groups"))
    expect(frame).toContain(`<a href="/-/orgs/acme/groups" aria-current="page">Groups</a>`)
    expect(frame).toContain("<h1>Acme &lt;Corp&gt;</h1>")
    expect(frame).toContain("You: member")
    expect(orgHref("a/b", "/members")).toBe("/-/orgs/a%2Fb/members")
  })
})
