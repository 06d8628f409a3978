import { describe, expect, it } from "@effect/vitest"
import { checkPath, checkPathSet } from "./Path.ts"

describe("Path", () => {
  it("accepts relative paths of valid names", () => {
    for (const good of ["a", "src/index.ts", ".oak/workflows/ci.yml", "a b/c d", "naïve/ü"]) expect(checkPath(good).ok, good).toBe(true)
  })

  it("rejects empty, absolute, empty segments, dot segments and control characters", () => {
    for (const bad of ["", "/a", "a/", "a//b", "./a", "a/./b", "a/../b", "..", "a/\tb", "a\nb", "a/\0"]) {
      expect(checkPath(bad).ok, JSON.stringify(bad)).toBe(false)
    }
  })

  it("rejects paths no checkout can write safely: .git in any case, backslashes, over-long names", () => {
    for (const bad of [".git/config", "a/.GIT/hooks/x", "git~1/config", "..\\..\\evil.bat", "C:\\Windows\\x.txt", `d/${"n".repeat(256)}`]) {
      expect(checkPath(bad).ok, JSON.stringify(bad)).toBe(false)
    }
  })

  it("rejects duplicates and a path that is both a file and a directory", () => {
    expect(checkPathSet(["a/b", "a/c", "b", "ab/c"]).ok).toBe(true)
    expect(checkPathSet(["x", "x"])).toEqual({ ok: false, reason: "duplicate path 'x'" })
    expect(checkPathSet(["a", "a/b"])).toEqual({ ok: false, reason: "'a' is both a file and a directory (of 'a/b')" })
    expect(checkPathSet(["a/b/c", "a/b"]).ok).toBe(false)
    expect(checkPathSet(["ok", "bad/"]).ok).toBe(false)
  })
})
