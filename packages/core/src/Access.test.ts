import { describe, expect, it } from "@effect/vitest"
import { type Action, decide, holdsRole, type Principal, type Resource, type TokenLimits } from "./Access.ts"

const anonymous: Principal = { kind: "anonymous" }
const alice: Principal = { kind: "user", userId: "u-alice", username: "alice", siteAdmin: false }
const root: Principal = { kind: "user", userId: "u-root", username: "root", siteAdmin: true }
const bot: Principal = { kind: "service_account", accountId: "sa-1", orgId: "org-acme", orgSlug: "acme", name: "bot" }

const none: TokenLimits = { kind: "none" }
const session: TokenLimits = { kind: "session" }
const full: TokenLimits = { kind: "personal", scope: "full" }
const readKey: TokenLimits = { kind: "personal", scope: "read" }
const repoKey: TokenLimits = { kind: "personal", scope: "full", repoId: "r-private" }

const publicRepo = (callerRole?: "member" | "admin" | "owner"): Resource => ({
  kind: "repository",
  repoId: "r-public",
  orgId: "org-acme",
  isPublic: true,
  callerRole
})
const privateRepo = (callerRole?: "member" | "admin" | "owner"): Resource => ({
  kind: "repository",
  repoId: "r-private",
  orgId: "org-acme",
  isPublic: false,
  callerRole
})
const org = (callerRole?: "member" | "admin" | "owner"): Resource => ({ kind: "organization", orgId: "org-acme", callerRole })

const status = (p: Principal, l: TokenLimits, r: Resource, a: Action) => {
  const d = decide(p, l, r, a)
  return d._tag === "Allow" ? 200 : d.status
}

describe("Access.decide", () => {
  // principal, limits, resource, action, expected status
  const table: ReadonlyArray<readonly [string, Principal, TokenLimits, Resource, Action, number]> = [
    ["anonymous reads a public repo", anonymous, none, publicRepo(), "read", 200],
    ["anonymous writes a public repo", anonymous, none, publicRepo(), "write", 401],
    ["anonymous reads a private repo", anonymous, none, privateRepo(), "read", 404],
    ["anonymous writes a private repo", anonymous, none, privateRepo(), "write", 404],
    ["anonymous reads an organization", anonymous, none, org(), "read", 404],
    ["anonymous whoami", anonymous, none, { kind: "account" }, "read", 401],
    ["member reads a private repo", alice, session, privateRepo("member"), "read", 200],
    ["member writes a private repo", alice, session, privateRepo("member"), "write", 200],
    ["member merges (needs admin role)", alice, full, privateRepo("member"), "merge", 403],
    ["org admin merges", alice, full, privateRepo("admin"), "merge", 200],
    ["member deletes (needs admin role)", alice, session, privateRepo("member"), "admin", 403],
    ["org admin deletes", alice, session, privateRepo("admin"), "admin", 200],
    ["non-member reads a private repo", alice, session, privateRepo(), "read", 404],
    ["non-member deletes a private repo", alice, session, privateRepo(), "admin", 404],
    ["non-member reads a public repo", alice, session, publicRepo(), "read", 200],
    ["non-member writes a public repo", alice, session, publicRepo(), "write", 403],
    ["read key reads", alice, readKey, privateRepo("owner"), "read", 200],
    ["read key writes", alice, readKey, privateRepo("owner"), "write", 403],
    ["read key creates a key", alice, readKey, { kind: "account" }, "write", 403],
    ["repo key on its repo", alice, repoKey, privateRepo("owner"), "write", 200],
    ["repo key on another repo", alice, repoKey, publicRepo("owner"), "read", 404],
    ["repo key on an organization", alice, repoKey, org("owner"), "read", 404],
    ["repo key whoami", alice, repoKey, { kind: "account" }, "read", 200],
    ["repo key creates a key", alice, repoKey, { kind: "account" }, "write", 403],
    ["site admin sees every private repo", root, session, privateRepo(), "admin", 200],
    ["site admin read key still cannot write", root, readKey, privateRepo(), "write", 403],
    ["service account with read scope writes", bot, { kind: "service", scopes: ["read"] }, privateRepo("member"), "write", 403],
    ["service account with write scope writes", bot, { kind: "service", scopes: ["read", "write"] }, privateRepo("member"), "write", 200],
    ["service account without merge scope merges", bot, { kind: "service", scopes: ["write"] }, privateRepo("admin"), "merge", 403],
    ["admin scope does not imply release", bot, { kind: "service", scopes: ["admin"] }, org("admin"), "release", 403],
    ["member reads the organization", alice, session, org("member"), "read", 200],
    ["member administers the organization", alice, session, org("member"), "admin", 403],
    ["owner administers the organization", alice, session, org("owner"), "admin", 200],
    ["non-member reads the organization", alice, session, org(), "read", 404]
  ]

  for (const [name, principal, limits, resource, action, expected] of table) {
    it(`${name} -> ${expected}`, () => {
      expect(status(principal, limits, resource, action)).toBe(expected)
    })
  }

  it("names the missing scope", () => {
    const d = decide(alice, readKey, privateRepo("owner"), "write")
    expect(d).toMatchObject({ _tag: "Deny", status: 403, missingScope: "write" })
    expect(d._tag === "Deny" && d.reason).toContain("'write'")
  })
})

describe("Access.holdsRole", () => {
  it("ranks member < admin < owner; an instance admin counts as owner; no role holds nothing", () => {
    expect(holdsRole(alice, "member", "admin")).toBe(false)
    expect(holdsRole(alice, "admin", "admin")).toBe(true)
    expect(holdsRole(alice, "owner", "admin")).toBe(true)
    expect(holdsRole(alice, "admin", "owner")).toBe(false)
    expect(holdsRole(alice, undefined, "member")).toBe(false)
    expect(holdsRole(root, undefined, "owner")).toBe(true)
    expect(holdsRole(bot, undefined, "member")).toBe(false)
    expect(holdsRole(anonymous, undefined, "member")).toBe(false)
  })
})
