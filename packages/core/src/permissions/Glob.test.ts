import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { compileGlob, matches } from "./Glob.ts"

/**
 * [pattern, path, covered]. Each row where git has an opinion was checked against
 * `git check-ignore --no-index` (git 2.39) with the pattern as the only line of a .gitignore
 * (131 rows, all agreeing except the deliberate difference: `?` and a class match one Unicode code
 * point where git matches one byte, so the rows `?.txt`/`é.txt`, `?.txt`/`😀.txt`, `[é]`/`é` and
 * `[α-ω]x`/`λx` are true here and false in git). The last test below re-checks this with git when
 * git is installed.
 */
const GLOB_CASES: ReadonlyArray<readonly [string, string, boolean]> = [
  // plain names: any depth, and everything under a matching directory
  ["README.md", "README.md", true],
  ["README.md", "docs/README.md", true],
  ["README.md", "README.mdx", false],
  ["README.md", "xREADME.md", false],
  ["docs", "docs/a.md", true],
  ["docs", "src/docs/a.md", true],
  ["docs", "docs", true],
  ["docs", "documents/a.md", false],
  ["readme.md", "README.md", false],
  // *.md
  ["*.md", "a.md", true],
  ["*.md", "docs/deep/a.md", true],
  ["*.md", ".md", true],
  ["*.md", "a.mdx", false],
  ["*.md", "a.md/inner.txt", true],
  ["*.md", "amd", false],
  ["*", "anything/at/all", true],
  ["*", "x", true],
  // leading slash anchors
  ["/docs", "docs/a.md", true],
  ["/docs", "src/docs/a.md", false],
  ["/docs", "docs", true],
  ["/*.md", "a.md", true],
  ["/*.md", "docs/a.md", false],
  // trailing slash: a directory, so only what is under it
  ["docs/", "docs/a.md", true],
  ["docs/", "src/docs/a.md", true],
  ["docs/", "docs", false],
  ["docs/", "docsx/a.md", false],
  ["/docs/", "docs/guide/a.md", true],
  ["/docs/", "docs", false],
  ["/docs/", "src/docs/a.md", false],
  ["*.d/", "conf.d/x", true],
  ["*.d/", "conf.d", false],
  // an inner slash anchors too
  ["docs/a.md", "docs/a.md", true],
  ["docs/a.md", "src/docs/a.md", false],
  ["docs/*", "docs/a.md", true],
  ["docs/*", "docs/deep/a.md", true],
  ["docs/*", "docs", false],
  ["docs/*", "src/docs/a.md", false],
  ["docs/*.md", "docs/a.md", true],
  ["docs/*.md", "docs/deep/a.md", false],
  ["a/b/", "a/b/c", true],
  ["a/b/", "x/a/b/c", false],
  // **
  ["**/x", "x", true],
  ["**/x", "a/x", true],
  ["**/x", "a/b/x", true],
  ["**/x", "a/b/x/y", true],
  ["**/x", "a/bx", false],
  ["**/x/y", "x/y", true],
  ["**/x/y", "a/b/x/y", true],
  ["**/x/y", "a/x/z/y", false],
  ["a/**", "a/b", true],
  ["a/**", "a/b/c/d", true],
  ["a/**", "a", false],
  ["a/**", "b/a/c", false],
  ["a/**", "ab/c", false],
  ["a/**/b", "a/b", true],
  ["a/**/b", "a/x/b", true],
  ["a/**/b", "a/x/y/b", true],
  ["a/**/b", "a/x/y/b/c", true],
  ["a/**/b", "a/xb", false],
  ["a/**/b", "x/a/b", false],
  ["a/**/", "a/d/f", true],
  ["a/**/", "a/f", false],
  ["**", "a", true],
  ["**", "a/b/c", true],
  ["/**", "a/b", true],
  ["**/", "a/b", true],
  ["**/", "a", false],
  ["**/*.md", "a.md", true],
  ["**/*.md", "a/b/c.md", true],
  ["a/**/**/b", "a/b", true],
  ["a/**/**/b", "a/x/y/b", true],
  ["a**b", "axyb", true],
  ["a**b", "ax/yb", false],
  ["**b", "x/ab", true],
  ["a/**b", "a/xb", true],
  ["a/**b", "a/x/b", false],
  // ?
  ["?.txt", "a.txt", true],
  ["?.txt", "ab.txt", false],
  ["?.txt", ".txt", false],
  ["a?b", "a/b", false],
  ["/a?c/", "abc/x", true],
  // character classes
  ["[abc].txt", "a.txt", true],
  ["[abc].txt", "d.txt", false],
  ["[a-c].txt", "b.txt", true],
  ["[a-c].txt", "B.txt", false],
  ["[!a-c].txt", "d.txt", true],
  ["[!a-c].txt", "a.txt", false],
  ["[^a-c].txt", "d.txt", true],
  ["[^a-c].txt", "b.txt", false],
  ["[]]x", "]x", true],
  ["[]a]x", "ax", true],
  ["[!]]x", "]x", false],
  ["[!]]x", "ax", true],
  ["[a-]x", "-x", true],
  ["[-a]x", "-x", true],
  ["[\\]]x", "]x", true],
  ["a[/]b", "a/b", false],
  ["a[!x]b", "a/b", false],
  ["[[:digit:]][[:digit:]].log", "42.log", true],
  ["[[:digit:]][[:digit:]].log", "4a.log", false],
  ["[[:upper:]]*", "Makefile", true],
  ["[[:upper:]]*", "makefile", false],
  ["[[:alpha:][:digit:]]", "7", true],
  ["[[:space:]]x", " x", true],
  ["*.[ch]", "src/main.c", true],
  ["*.[ch]", "src/main.h", true],
  ["*.[ch]", "src/main.o", false],
  // escapes
  ["\\*.md", "*.md", true],
  ["\\*.md", "a.md", false],
  ["a\\?", "a?", true],
  ["a\\?", "ab", false],
  ["\\[x]", "[x]", true],
  ["\\[x]", "x", false],
  ["\\#notes", "#notes", true],
  ["\\!important", "!important", true],
  ["my\\ file.txt", "my file.txt", true],
  ["\\a\\b", "ab", true],
  ["a#b", "a#b", true],
  // unicode names
  ["résumé.txt", "cv/résumé.txt", true],
  ["résumé.txt", "cv/resume.txt", false],
  ["/日本語/", "日本語/ファイル.md", true],
  ["*.日本", "x/y.日本", true],
  ["?.txt", "é.txt", true],
  ["?.txt", "😀.txt", true],
  ["[é]", "é", true],
  ["[α-ω]x", "λx", true],
  ["[α-ω]x", "Λx", false],
  ["😀*", "😀party/x", true],
  // dots are ordinary characters (no hidden-file rule)
  ["*", ".env", true],
  [".*", ".github/workflows/ci.yml", true],
  [".oak/PERMISSIONS", ".oak/PERMISSIONS", true]
]

describe("Glob", () => {
  for (const [pattern, path, covered] of GLOB_CASES) {
    it(`${JSON.stringify(pattern)} ${covered ? "covers" : "does not cover"} ${JSON.stringify(path)}`, () => {
      const compiled = compileGlob(pattern)
      if (!compiled.ok) throw new Error(`pattern ${pattern}: ${compiled.reason}`)
      expect(matches(compiled.glob, path)).toBe(covered)
    })
  }

  const BAD: ReadonlyArray<readonly [string, string]> = [
    ["", "is empty"],
    ["/", "names no file or directory"],
    ["//", "names no file or directory"],
    ["a//b", "has an empty path segment ('//')"],
    ["docs//", "has an empty path segment ('//')"],
    ["a\\", "ends with an unescaped '\\'"],
    ["[abc", "has an unterminated character class '['"],
    ["[]", "has an unterminated character class '['"],
    ["[!]", "has an unterminated character class '['"],
    ["[z-a]", "has a reversed range 'z-a'"],
    ["[[:nope:]]", "has an unknown character class '[:nope:]'"],
    ["../x", "has a '..' segment, which never matches a path"],
    ["./x", "has a '.' segment, which never matches a path"],
    ["a/../b", "has a '..' segment, which never matches a path"]
  ]
  for (const [pattern, reason] of BAD) {
    it(`refuses ${JSON.stringify(pattern)}: ${reason}`, () => {
      expect(compileGlob(pattern)).toEqual({ ok: false, reason })
    })
  }

  it("anchoring and directory flags", () => {
    const flags = (pattern: string) => {
      const compiled = compileGlob(pattern)
      if (!compiled.ok) throw new Error(compiled.reason)
      return [compiled.glob.anchored, compiled.glob.directoryOnly]
    }
    expect(flags("docs")).toEqual([false, false])
    expect(flags("docs/")).toEqual([false, true])
    expect(flags("/docs")).toEqual([true, false])
    expect(flags("/docs/")).toEqual([true, true])
    expect(flags("a/b")).toEqual([true, false])
    expect(flags("**/b")).toEqual([true, false])
  })

  it("stays fast on patterns built to make backtracking matchers explode", () => {
    const compiled = compileGlob(`${"*a".repeat(30)}*b`)
    if (!compiled.ok) throw new Error(compiled.reason)
    const path = `${"x/".repeat(100)}${"a".repeat(250)}`
    const deep = compileGlob(`${"**/a/".repeat(20)}b`)
    if (!deep.ok) throw new Error(deep.reason)
    const start = performance.now()
    expect(matches(compiled.glob, path)).toBe(false)
    expect(matches(deep.glob, `${"a/".repeat(200)}c`)).toBe(false)
    // A backtracking matcher takes minutes here; a generous bound, so a loaded machine does not fail it.
    expect(performance.now() - start).toBeLessThan(2000)
  })

  // Rows where git deliberately differs: it matches bytes, we match code points.
  const GIT_DIFFERS = new Set(["?.txt é.txt", "?.txt 😀.txt", "[é] é", "[α-ω]x λx"])
  const hasGit = spawnSync("git", ["--version"]).status === 0

  it.skipIf(!hasGit)("agrees with git check-ignore on every row (one repository, one .gitignore per row)", () => {
    const root = mkdtempSync(join(tmpdir(), "grove-glob-"))
    try {
      expect(spawnSync("git", ["init", "-q"], { cwd: root }).status).toBe(0)
      const inputs: Array<string> = []
      // The paths need not exist: git takes a missing path for a file and its leading parts for directories.
      GLOB_CASES.forEach(([pattern, path], i) => {
        mkdirSync(join(root, `c${i}`))
        writeFileSync(join(root, `c${i}`, ".gitignore"), `${pattern}\n`)
        inputs.push(`c${i}/${path}`)
      })
      const run = spawnSync("git", ["check-ignore", "--no-index", "--stdin", "-z", "-v", "-n"], {
        cwd: root,
        input: inputs.map((input) => `${input}\0`).join(""),
        encoding: "utf8"
      })
      const fields = run.stdout.split("\0")
      const ignored = new Map<string, boolean>()
      for (let f = 0; f + 3 < fields.length; f += 4) ignored.set(fields[f + 3]!, fields[f]!.length > 0)
      const disagreements = GLOB_CASES.flatMap(([pattern, path, covered], i) => {
        const git = ignored.get(`c${i}/${path}`)
        const expected = GIT_DIFFERS.has(`${pattern} ${path}`) ? !covered : covered
        return git === expected ? [] : [`${pattern} ${path}: git ${String(git)}`]
      })
      expect(disagreements).toEqual([])
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
