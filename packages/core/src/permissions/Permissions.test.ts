import { describe, expect, it } from "@effect/vitest"
import {
  accessChecker,
  callerPrincipals,
  isRestricted,
  MAX_FILE_BYTES,
  MAX_LINE_LENGTH,
  MAX_RULES,
  matchingEntry,
  parsePermissions,
  parsePermissionsBytes,
  parsePrincipal,
  pathAccess,
  withUnknownPrincipals
} from "./Permissions.ts"
import type { Caller, WarningCode } from "./Permissions.ts"
import { growth } from "../Growth.testing.ts"

const alice: Caller = { user: "alice" }
const bob: Caller = { user: "bob", groups: ["acme/eng"] }
const carol: Caller = { user: "carol", groups: ["acme/ops", "acme/eng"] }
const anonymous: Caller = {}

const codes = (content: string): Array<[number, WarningCode]> =>
  parsePermissions(content).warnings.map((warning) => [warning.line, warning.code])

describe("Permissions: parsing", () => {
  it("reads entries, principals and line numbers; comments and blank lines are skipped", () => {
    const file = parsePermissions(
      [
        "# Who reads what",
        "",
        "/secrets/   @acme/ops   # trailing comment",
        "   ",
        "*.pem\t@alice @acme/security",
        "  # indented comment",
        "/docs/public/ *",
        "/docs/ @Alice @alice @acme/ops#x"
      ].join("\n")
    )
    expect(file.entries).toEqual([
      { line: 3, pattern: "/secrets/", principals: ["@acme/ops"] },
      { line: 5, pattern: "*.pem", principals: ["@alice", "@acme/security"] },
      { line: 7, pattern: "/docs/public/", principals: ["*"] },
      { line: 8, pattern: "/docs/", principals: ["@alice"] }
    ])
    expect(file.principals).toEqual(["@acme/ops", "@alice", "@acme/security", "*"])
    expect(file.warnings).toEqual([
      {
        line: 8,
        code: "malformed_principal",
        message:
          "line 8: '@acme/ops#x' is not a valid @org/group: group may contain only lowercase letters, digits and inner hyphens, starting and ending with a letter or digit; it grants nothing"
      }
    ])
    expect(file.valid).toBe(false)
    expect(file.lockdown).toBe(false)
  })

  it("an empty file, or one of comments, is valid and restricts nothing", () => {
    for (const content of ["", "\n\n", "# only a comment\n   # another\n"]) {
      const file = parsePermissions(content)
      expect(file.entries).toEqual([])
      expect(file.valid).toBe(true)
      expect(pathAccess(file, "a/b.txt", anonymous)).toEqual({ restricted: false, granted: true, entry: undefined })
    }
  })

  it("CRLF line endings and a byte-order mark", () => {
    const file = parsePermissions("\uFEFF/a @alice\r\n# c\r\n/b *\r\n")
    expect(file.entries).toEqual([
      { line: 1, pattern: "/a", principals: ["@alice"] },
      { line: 3, pattern: "/b", principals: ["*"] }
    ])
    expect(file.valid).toBe(true)
  })

  it("a # inside a token is part of it; a token starting with # starts a comment; \\# starts a pattern", () => {
    const file = parsePermissions("a#b @alice\n\\#notes @bob # @carol\nx @alice# y\n")
    expect(file.entries.map((entry) => [entry.pattern, entry.principals])).toEqual([
      ["a#b", ["@alice"]],
      ["\\#notes", ["@bob"]],
      ["x", []]
    ])
    expect(matchingEntry(file, "dir/#notes")?.line).toBe(2)
    expect(codes("x @alice# y\n")).toEqual([[1, "malformed_principal"], [1, "malformed_principal"], [1, "no_principal"]])
  })

  it("escaped spaces belong to the pattern", () => {
    const file = parsePermissions("my\\ file.txt @alice\n")
    expect(file.entries[0]?.pattern).toBe("my\\ file.txt")
    expect(isRestricted(file, "dir/my file.txt")).toBe(true)
    expect(isRestricted(file, "dir/my")).toBe(false)
  })

  // [content, expected warnings as [line, code]]
  const WARNINGS: ReadonlyArray<readonly [string, ReadonlyArray<readonly [number, WarningCode]>]> = [
    ["/a @alice\n/b @acme/eng\n/c *\n", []],
    ["/a alice\n", [[1, "malformed_principal"], [1, "no_principal"]]],
    ["/a alice@example.com @bob\n", [[1, "malformed_principal"]]],
    ["/a @\n", [[1, "malformed_principal"], [1, "no_principal"]]],
    ["/a @a/b/c\n", [[1, "malformed_principal"], [1, "no_principal"]]],
    ["/a @org/\n", [[1, "malformed_principal"], [1, "no_principal"]]],
    ["/a @-x\n", [[1, "malformed_principal"], [1, "no_principal"]]],
    ["/a @a_b\n", [[1, "malformed_principal"], [1, "no_principal"]]],
    ["/a @" + "x".repeat(40) + "\n", [[1, "malformed_principal"], [1, "no_principal"]]],
    ["/a **\n", [[1, "malformed_principal"], [1, "no_principal"]]],
    ["\n\n/secrets/\n", [[3, "no_principal"]]],
    ["/a @alice\n[abc @bob\n", [[2, "bad_glob"]]],
    ["a\\ @bob\n", [[1, "no_principal"]]],
    ["/a @bob\na\\\n", [[2, "bad_glob"]]],
    ["a//b @bob\n", [[1, "bad_glob"]]],
    ["/ @bob\n", [[1, "bad_glob"]]],
    ["../x @bob\n", [[1, "bad_glob"]]],
    ["[z-a] @bob\n", [[1, "bad_glob"]]],
    ["!/docs/keep.md @bob\n", [[1, "negation"]]],
    ["\\!bang @bob\n", []],
    ["# x\n!a @bob\nb bad-principal\n[ *\n", [[2, "negation"], [3, "malformed_principal"], [3, "no_principal"], [4, "bad_glob"]]],
    [`/a ${"@alice ".repeat(MAX_LINE_LENGTH / 7 + 1)}\n/b @bob\n`, [[1, "line_too_long"]]],
    [`# ${"long comment ".repeat(MAX_LINE_LENGTH / 10)}\n`, []]
  ]
  for (const [content, expected] of WARNINGS) {
    it(`warnings for ${JSON.stringify(content.length > 60 ? `${content.slice(0, 60)}…` : content)}`, () => {
      const file = parsePermissions(content)
      expect(file.warnings.map((warning) => [warning.line, warning.code])).toEqual(expected)
      expect(file.valid).toBe(expected.length === 0)
      for (const warning of file.warnings) expect(warning.message).toContain(`line ${warning.line}`)
    })
  }

  it("messages say what is wrong and what happens", () => {
    const [negation, glob, none] = parsePermissions("!a @bob\n[x @bob\n/secret\n").warnings
    expect(negation?.message).toBe(
      "line 1: negation '!a' is not supported (as in CODEOWNERS): the line is ignored; write '\\!' for a name starting with '!'"
    )
    expect(glob?.message).toBe("line 2: the pattern '[x' has an unterminated character class '[': the line is ignored")
    expect(none?.message).toBe(
      "line 3: the pattern '/secret' names no principal: its paths are restricted to organization owners and admins (write * to open them to every reader)"
    )
  })

  it("ignored lines are not entries: bad globs and negations", () => {
    const file = parsePermissions("/a @alice\n[x @bob\n!b @bob\n/c @carol\n")
    expect(file.entries.map((entry) => entry.line)).toEqual([1, 4])
    expect(file.principals).toEqual(["@alice", "@carol"])
  })

  it("parses principals", () => {
    expect(parsePrincipal("*")).toEqual({ ok: true, principal: { kind: "everyone" }, canonical: "*" })
    expect(parsePrincipal("@Alice")).toEqual({ ok: true, principal: { kind: "user", user: "alice" }, canonical: "@alice" })
    expect(parsePrincipal("@acme/Eng-1")).toEqual({
      ok: true,
      principal: { kind: "group", org: "acme", group: "eng-1" },
      canonical: "@acme/eng-1"
    })
    for (const bad of ["alice", "@", "@/x", "@x/", "@a/b/c", "@a b", "a@b.c", "@é", "**", "@a--b"]) {
      expect(parsePrincipal(bad).ok, bad).toBe(false)
    }
  })
})

describe("Permissions: limits fail closed", () => {
  it("a file over the size limit is a lockdown: every path restricted, nobody granted", () => {
    const content = `/a *\n${"# padding\n".repeat(MAX_FILE_BYTES / 10 + 1)}`
    const file = parsePermissions(content)
    expect(file.lockdown).toBe(true)
    expect(file.entries).toEqual([])
    expect(file.warnings.map((warning) => [warning.line, warning.code])).toEqual([[0, "file_too_large"]])
    expect(pathAccess(file, "a", alice)).toEqual({ restricted: true, granted: false, entry: undefined })
    expect(pathAccess(file, "README.md", anonymous).granted).toBe(false)
  })

  it("the size limit counts UTF-8 bytes", () => {
    const fits = `/a *\n# ${"é".repeat((MAX_FILE_BYTES - 8) / 2)}`
    expect(parsePermissions(fits).lockdown).toBe(false)
    expect(parsePermissions(`${fits}éé`).lockdown).toBe(true)
  })

  it("bytes: the size is checked before decoding; invalid UTF-8 is a lockdown", () => {
    expect(parsePermissionsBytes(new TextEncoder().encode("\uFEFF/a @alice\n")).entries).toEqual([
      { line: 1, pattern: "/a", principals: ["@alice"] }
    ])
    expect(parsePermissionsBytes(new Uint8Array(MAX_FILE_BYTES + 1)).warnings[0]?.code).toBe("file_too_large")
    const broken = parsePermissionsBytes(new Uint8Array([0x2f, 0x61, 0x20, 0x2a, 0xff, 0x0a]))
    expect(broken.lockdown).toBe(true)
    expect(broken.warnings.map((warning) => [warning.line, warning.code])).toEqual([[0, "not_utf8"]])
  })

  it("more than MAX_RULES rules is a lockdown naming the first line over", () => {
    const lines = Array.from({ length: MAX_RULES + 5 }, (_, i) => `/f${i} *`)
    const file = parsePermissions(`# header\n${lines.join("\n")}\n`)
    expect(file.lockdown).toBe(true)
    expect(file.warnings.map((warning) => [warning.line, warning.code])).toEqual([[MAX_RULES + 2, "too_many_rules"]])
    expect(pathAccess(file, "unrelated.txt", alice).granted).toBe(false)
    expect(parsePermissions(`${lines.slice(0, MAX_RULES).join("\n")}\n`).lockdown).toBe(false)
  })
})

describe("Permissions: matching", () => {
  const file = parsePermissions(
    [
      "# everything under /secrets is for ops",
      "/secrets/          @acme/ops",
      "# but the readme there is public",
      "/secrets/README.md *",
      "*.pem              @alice",
      "/docs/             @acme/eng @carol",
      "/docs/internal/    @acme/ops",
      "/locked/           @nobody_here",
      "/closed/",
      "/vendor/ *"
    ].join("\n")
  )

  // [path, caller, restricted, granted, deciding line]
  const CASES: ReadonlyArray<readonly [string, Caller, boolean, boolean, number | undefined]> = [
    ["README.md", anonymous, false, true, undefined],
    ["src/main.ts", alice, false, true, undefined],
    ["secrets/db.txt", carol, true, true, 2],
    ["secrets/db.txt", bob, true, false, 2],
    ["secrets/db.txt", alice, true, false, 2],
    ["secrets/db.txt", anonymous, true, false, 2],
    ["secrets/README.md", anonymous, true, true, 4],
    ["secrets/README.md", bob, true, true, 4],
    ["secrets/deep/README.md", bob, true, false, 2],
    // last match wins: *.pem (line 5) comes after /secrets/ (line 2)
    ["secrets/key.pem", alice, true, true, 5],
    ["secrets/key.pem", carol, true, false, 5],
    ["src/tls/server.pem", alice, true, true, 5],
    ["src/tls/server.pem", bob, true, false, 5],
    // ...but /docs/ (line 6) comes after *.pem
    ["docs/cert.pem", alice, true, false, 6],
    ["docs/cert.pem", bob, true, true, 6],
    ["docs/guide.md", carol, true, true, 6],
    ["docs/internal/plan.md", bob, true, false, 7],
    ["docs/internal/plan.md", carol, true, true, 7],
    ["documentation/x.md", bob, false, true, undefined],
    // only malformed principals: restricted, nobody granted
    ["locked/a.txt", alice, true, false, 8],
    ["locked/a.txt", { user: "nobody_here" }, true, false, 8],
    // no principal at all: the same
    ["closed/a.txt", carol, true, false, 9],
    // * opens to every reader, anonymous included
    ["vendor/lib.js", anonymous, true, true, 10],
    // principals are compared lowercase; groups may be given with or without @
    ["secrets/db.txt", { user: "CAROL" }, true, false, 2],
    ["secrets/db.txt", { groups: ["ACME/OPS"] }, true, true, 2],
    ["secrets/db.txt", { groups: ["@acme/ops"] }, true, true, 2],
    // a user named like a group's slug is not the group
    ["secrets/db.txt", { user: "ops" }, true, false, 2],
    // a stray leading slash is not trusted to mean anything else
    ["/secrets/db.txt", alice, true, false, 2]
  ]
  for (const [path, caller, restricted, granted, line] of CASES) {
    it(`${path} for ${JSON.stringify(caller)}: ${restricted ? "restricted" : "open"}, ${granted ? "granted" : "withheld"}`, () => {
      const access = pathAccess(file, path, caller)
      expect([access.restricted, access.granted, access.entry?.line]).toEqual([restricted, granted, line])
      expect(isRestricted(file, path)).toBe(restricted)
      expect(matchingEntry(file, path)?.line).toBe(line)
    })
  }

  it("warns about the rule naming only malformed principals", () => {
    expect(file.warnings.map((warning) => [warning.line, warning.code])).toEqual([
      [8, "malformed_principal"],
      [8, "no_principal"],
      [9, "no_principal"]
    ])
  })

  it("precedence: the same path flips with every later rule", () => {
    const rules = ["* @alice", "*.md @bob", "/docs/ @carol", "docs/*.md *", "/docs/x.md @alice"]
    const expected = [
      ["@alice", "@alice", "@alice", "@alice", "@alice"],
      ["@alice", "@bob", "@carol", "*", "@alice"]
    ]
    for (let n = 1; n <= rules.length; n++) {
      const partial = parsePermissions(rules.slice(0, n).join("\n"))
      expect(matchingEntry(partial, "src/a.ts")?.principals[0]).toBe(expected[0]![n - 1])
      expect(matchingEntry(partial, "docs/x.md")?.principals[0]).toBe(expected[1]![n - 1])
    }
  })

  it("a bad rule is ignored, not treated as the last match", () => {
    const partial = parsePermissions("/docs/ @carol\n/docs/[x @alice\n")
    expect(pathAccess(partial, "docs/[x", alice)).toMatchObject({ restricted: true, granted: false })
  })

  it("accessChecker answers many paths for one caller", () => {
    const check = accessChecker(file, bob)
    expect(["README.md", "secrets/db.txt", "docs/a.md", "vendor/x"].map((path) => check(path).granted)).toEqual([
      true,
      false,
      true,
      true
    ])
  })

  it("callerPrincipals", () => {
    expect([...callerPrincipals({ user: "Bob", groups: ["acme/eng", "@acme/ops"] })]).toEqual(["@bob", "@acme/eng", "@acme/ops"])
    expect([...callerPrincipals({})]).toEqual([])
  })

  it("withUnknownPrincipals warns on every line naming an unknown user or group", () => {
    const parsed = parsePermissions("/a @alice @ghost\n/b @acme/ghosts *\n/c @ghost\n")
    expect(parsed.valid).toBe(true)
    const known = new Set(["@alice"])
    const checked = withUnknownPrincipals(parsed, (principal) => known.has(principal))
    expect(checked.warnings).toEqual([
      { line: 1, code: "unknown_principal", message: "line 1: unknown user @ghost: it grants nothing" },
      { line: 2, code: "unknown_principal", message: "line 2: unknown group @acme/ghosts: it grants nothing" },
      { line: 3, code: "unknown_principal", message: "line 3: unknown user @ghost: it grants nothing" }
    ])
    expect(checked.valid).toBe(false)
    expect(checked.entries).toBe(parsed.entries)
    expect(withUnknownPrincipals(parsed, () => true)).toBe(parsed)
  })

  // Not a timed test (the machine is shared): 1000 rules against 100 in the same run. Checking a
  // path grows with the rules at most linearly (10x); a matcher that backtracked or recompiled would grow far more.
  it("grows at most linearly with the rules: 1000 rules x 2000 paths against 100 rules", () => {
    const rules = (n: number) =>
      parsePermissions(
        Array.from({ length: n }, (_, i) => (i % 3 === 0 ? `/dir${i}/**/*.md @u${i}` : i % 3 === 1 ? `*.ext${i} @u${i}` : `f${i}/ @org/g${i}`)).join("\n")
      )
    const big = rules(MAX_RULES)
    expect(big.lockdown).toBe(false)
    // One pass over 2000 paths; the two rule sets are measured in turns, five rounds, fastest CPU time of each, so a
    // burst of load on the shared machine during one round does not decide the comparison.
    const pass = (check: ReturnType<typeof accessChecker>) => {
      let restricted = 0
      for (let i = 0; i < 2000; i++) if (check(`dir${i % 50}/a/b/c/file${i}.md`).restricted) restricted++
      return restricted
    }
    const smallCheck = accessChecker(rules(MAX_RULES / 10), { user: "u3" })
    const largeCheck = accessChecker(big, { user: "u3" })
    const measured = growth(() => pass(smallCheck), () => pass(largeCheck))
    expect(measured.result).toBeGreaterThan(0)
    expect(measured.large, `${measured.large.toFixed(1)} ms vs ${measured.small.toFixed(1)} ms`).toBeLessThan(15 * measured.small + 50)
  })
})
