import type { Caller } from "@grove/api"
import { describe, expect, it } from "@effect/vitest"
import { principalKey, readableRepositories } from "./DedupScope.ts"

const alice = { kind: "user", userId: "u1", username: "alice", siteAdmin: false } as const
const repos = [{ id: "pub", isPublic: true }, { id: "priv", isPublic: false }]

describe("readableRepositories: what dedup may count as present for a caller", () => {
  const cases: ReadonlyArray<readonly [string, Caller, "member" | undefined, ReadonlyArray<string>]> = [
    ["a member's user key reads every repository", { principal: alice, limits: { kind: "personal", scope: "full" } }, "member", ["pub", "priv"]],
    ["a session reads every repository", { principal: alice, limits: { kind: "session" } }, "member", ["pub", "priv"]],
    ["a key limited to pub reads pub only", { principal: alice, limits: { kind: "personal", scope: "full", repoId: "pub" } }, "member", ["pub"]],
    ["a read key limited to priv reads priv only", { principal: alice, limits: { kind: "personal", scope: "read", repoId: "priv" } }, "member", ["priv"]],
    ["a non-member reads public repositories only", { principal: alice, limits: { kind: "personal", scope: "full" } }, undefined, ["pub"]],
    ["anonymous reads public repositories only", { principal: { kind: "anonymous" }, limits: { kind: "none" } }, undefined, ["pub"]]
  ]
  for (const [name, caller, role, expected] of cases) {
    it(name, () => {
      expect(readableRepositories(caller, "org", role, repos)).toEqual(expected)
    })
  }

  it("names uploaders by principal", () => {
    expect(principalKey(alice)).toBe("user:u1")
    expect(principalKey({ kind: "service_account", accountId: "s1", orgId: "o", orgSlug: "o", name: "ci" })).toBe("service_account:s1")
    expect(principalKey({ kind: "anonymous" })).toBeUndefined()
  })
})
