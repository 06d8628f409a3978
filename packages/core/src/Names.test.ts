import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { checkBranchName, checkHash, checkMessage, checkNewBranchName, checkRepoName, checkSlug, checkSlugFormat, checkText, parseFullName } from "./Names.ts"

describe("Names", () => {
  it("accepts ordinary slugs and rejects the rest", () => {
    for (const good of ["alice", "a", "acme-corp", "x1", "a".repeat(39)]) expect(checkSlug(good).ok).toBe(true)
    for (const bad of ["", "Alice", "-a", "a-", "a--b", "a.b", "a/b", "a b", "a\u0000", "orgs", "repos", "a".repeat(40), ".."]) {
      expect(checkSlug(bad).ok, bad).toBe(false)
    }
  })

  it("tells a slug's shape from a slug that may be created: reserved slugs have the shape", () => {
    for (const reserved of ["orgs", "repos", "api"]) {
      expect(checkSlugFormat(reserved).ok, reserved).toBe(true)
      expect(checkSlug(reserved).ok, reserved).toBe(false)
    }
    for (const bad of ["", "Alice", "a--b", "a\u0000", "a".repeat(40)]) expect(checkSlugFormat(bad).ok, bad).toBe(false)
  })

  it("accepts branch names with slashes, spaces and Unicode, and refuses control characters and overlong names", () => {
    for (const good of ["main", "feature/x y", " lead", "é", "😀", "a".repeat(255)]) expect(checkBranchName(good).ok, good).toBe(true)
    for (
      const bad of ["", "a\u0000", "a\nb", "a\tb", "a\u0001", "a\u007f", "a\u009f", "a\ud800", "a".repeat(256)]
    ) {
      expect(checkBranchName(bad).ok, JSON.stringify(bad)).toBe(false)
    }
    expect(checkBranchName("a\u0000")).toEqual({ ok: false, reason: "branch name must not contain newline, tab or NUL" })
    expect(checkBranchName("a\u0001")).toEqual({ ok: false, reason: "branch name must not contain control characters" })
  })

  // One rule for a branch a request creates (POST /branches and push), issue 9 item 3.
  const newBranchCases: ReadonlyArray<readonly [string, boolean]> = [
    ["feature/x-y", true],
    ["feature/x y", false],
    ["a".repeat(255), true],
    ["headless", true],
    ["refs", true],
    ["my/refs/x", true],
    ["é😀", true],
    ["a".repeat(256), false],
    ["main ", false],
    [" lead", false],
    ["trail\u00a0", false],
    ["HEAD", false],
    ["head", false],
    ["Head", false],
    ["refs/heads/x", false],
    ["refs/", false],
    ["", false],
    ["a\nb", false]
  ]
  for (const [name, accepted] of newBranchCases) {
    it(`checkNewBranchName ${accepted ? "accepts" : "refuses"} ${JSON.stringify(name.length > 40 ? `${name.slice(0, 10)}… (${name.length})` : name)}`, () => {
      expect(checkNewBranchName(name).ok).toBe(accepted)
    })
  }

  // git's check-ref-format rules (issue 20 item 5): what git refuses, a new branch may not be called.
  const gitCases: ReadonlyArray<string> = [
    "main", "feature/x", "a/-b", "a-", "x.lockx", "a@b", "@b", "é", "ブランチ/x", "v1.2", "a_b", "a+b", "a,b", "a=b", "a'b",
    "-x", "-", "a..b", "..", ".a", "a/.b", "x.lock", "x.lock/y", "a/b.lock", "@{u}", "a@{1}", "a b", "a~1", "a^", "a:b", "a?", "a*",
    "a[b", "a\\b", "a/", "/a", "a//b", "a.", "a/b.", "ab\u007f"
  ]
  it("refuses every name git's check-ref-format --branch refuses, and accepts what it accepts", () => {
    const mismatches: Array<string> = []
    for (const name of gitCases) {
      // Outside a repository: `--branch` then checks refs/heads/<name> and the leading '-'.
      const git = spawnSync("git", ["check-ref-format", "--branch", name], { cwd: "/", encoding: "utf8" })
      expect(git.error).toBeUndefined()
      const ours = checkNewBranchName(name).ok
      if (ours !== (git.status === 0)) mismatches.push(`${JSON.stringify(name)}: git ${git.status === 0}, ours ${ours}`)
    }
    expect(mismatches).toEqual([])
    // Stricter than git on purpose: '@' alone is git's HEAD; HEAD and refs/... are ambiguous; surrounding whitespace.
    for (const name of ["@", "HEAD", "refs/heads/x", "x\u00a0"]) expect(checkNewBranchName(name).ok, name).toBe(false)
    expect(checkNewBranchName("x.lock")).toEqual({ ok: false, reason: "no part of a branch name between slashes may end with '.lock'" })
  })

  it("lets a commit message or description carry newlines, tabs and carriage returns, never NUL or another control character", () => {
    for (const good of ["", "Fix\r\n\tthe parser\n", "é😀"]) expect(checkMessage(good, "message", 100).ok, JSON.stringify(good)).toBe(true)
    for (const bad of ["a\u0000b", "a\u0001", "a\u001b[31m", "a\u007f", "a\u0085", "a\ud800", "x".repeat(101)]) {
      expect(checkMessage(bad, "message", 100).ok, JSON.stringify(bad)).toBe(false)
    }
  })

  it("checks hashes: 64 lowercase hex characters", () => {
    expect(checkHash("0".repeat(64)).ok).toBe(true)
    for (const bad of ["", "0".repeat(63), "A".repeat(64), "0".repeat(65), 42]) expect(checkHash(bad).ok, String(bad)).toBe(false)
  })

  it("accepts repository names and rejects traversal, separators, whitespace and control characters", () => {
    for (const good of ["proj", "my.repo", "a_b-c", "_x", "X1", "a".repeat(100)]) expect(checkRepoName(good).ok, good).toBe(true)
    for (
      const bad of ["", ".", "..", "a..b", ".hidden", "a/b", "a\\b", "a b", "a\tb", "a\nb", "a\u007f", "x.git", "X.GIT", "a".repeat(101), "é"]
    ) {
      expect(checkRepoName(bad).ok, JSON.stringify(bad)).toBe(false)
    }
  })

  it("bounds free text by characters, not bytes", () => {
    expect(checkText("é".repeat(100), "name", 1, 100).ok).toBe(true)
    expect(checkText("é".repeat(101), "name", 1, 100).ok).toBe(false)
    expect(checkText("", "name", 1, 100)).toEqual({ ok: false, reason: "name must not be empty" })
    expect(checkText("   ", "name", 1, 100).ok).toBe(false)
    expect(checkText("a\u0007", "name", 1, 100).ok).toBe(false)
  })

  it("parses owner/name", () => {
    expect(parseFullName("alice/proj")).toEqual({ owner: "alice", name: "proj" })
    expect(parseFullName("alice/proj/x")).toBeUndefined()
    expect(parseFullName("alice")).toBeUndefined()
    expect(parseFullName("alice/..")).toBeUndefined()
  })
})
