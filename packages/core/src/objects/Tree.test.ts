import { describe, expect, it } from "@effect/vitest"
import { hash } from "./Blake3.ts"
import {
  checkEntryMode,
  checkEntryName,
  checkTree,
  checkTreeEntries,
  checkWireEntryName,
  compareNames,
  decodeTree,
  dotGroveIn,
  mayHoldDotGrove,
  encodeTree,
  hashTree,
  isDotGit,
  isDotGrove,
  MAX_ENTRY_NAME_BYTES
} from "./Tree.ts"
import type { TreeEntry } from "./Tree.ts"

const EMPTY = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
const HELLO = "d74981efa70a0c880b8d8c1985d075dbcbf679b99a5f9914e5aaf96b831a9e24"

const blob = (name: string, mode: TreeEntry["mode"] = "regular", h = HELLO): TreeEntry => ({ name, kind: "blob", hash: h, mode })
const tree = (name: string, h = EMPTY): TreeEntry => ({ name, kind: "tree", hash: h, mode: "tree" })

describe("Tree", () => {
  it("hashes the empty tree to the known value", () => {
    expect(encodeTree([])).toBe("")
    expect(hashTree([])).toBe(EMPTY)
  })

  it("encodes one line per entry, sorted by name, no trailing newline", () => {
    const entries = [blob("b.txt", "executable"), tree("a"), blob("link", "symlink", EMPTY)]
    const text = `tree\ta\t${EMPTY}\ttree\nblob\tb.txt\t${HELLO}\texecutable\nblob\tlink\t${EMPTY}\tsymlink`
    expect(encodeTree(entries)).toBe(text)
    expect(hashTree(entries)).toBe(hash(text))
    expect(hashTree([...entries].reverse())).toBe(hash(text))
  })

  it("sorts by UTF-8 byte order, not UTF-16 code units", () => {
    // U+FF5E encodes as EF BD 9E, U+1F600 as F0 9F 98 80: the emoji sorts last in bytes, first in UTF-16.
    expect(compareNames("\u{1F600}", "\uFF5E")).toBeGreaterThan(0)
    expect(encodeTree([blob("\u{1F600}"), blob("\uFF5E")]).split("\n").map((l) => l.split("\t")[1])).toEqual(["\uFF5E", "\u{1F600}"])
    expect(compareNames("B", "a")).toBeLessThan(0)
    expect(compareNames("a", "ab")).toBeLessThan(0)
    expect(compareNames("a\u{1F600}b", "a\u{1F600}c")).toBeLessThan(0)
    expect(compareNames("same", "same")).toBe(0)
  })

  it("accepts ordinary entry names and rejects empty, dot names, slashes and control characters", () => {
    for (const good of ["a", "README.md", ".gitignore", "...", "a b", "naïve", "\u{1F600}", "a".repeat(255)]) {
      expect(checkEntryName(good).ok, good).toBe(true)
    }
    for (const bad of ["", ".", "..", "a/b", "/", "a\tb", "a\nb", "a\0b", "a\rb", "a\u001bb", "a\u007f", "a\u0085", "\uD800"]) {
      expect(checkEntryName(bad).ok, JSON.stringify(bad)).toBe(false)
    }
  })

  // What no checkout can write safely (issue 9, item 3): git fsck's hasDot, hasDotdot, hasDotgit
  // (is_hfs_dotgit, is_ntfs_dotgit), fullPathname, emptyName; backslashes; names past 255 bytes.
  const unsafe: ReadonlyArray<readonly [string, string]> = [
    ["", "empty"],
    [".", "dot"],
    ["..", "dot-dot"],
    ["a/b", "slash"],
    ["a\0b", "NUL"],
    ["..\\..\\evil.bat", "climbing with backslashes"],
    ["C:\\Windows\\x.txt", "drive path with backslashes"],
    ["a\\b", "backslash"],
    ["\\", "a lone backslash"],
    [".git", ".git"],
    [".GIT", ".git upper case"],
    [".Git", ".git mixed case"],
    ["git~1", "NTFS short name"],
    ["GIT~1", "NTFS short name, upper case"],
    [".git.", "NTFS trailing dot"],
    [".git ", "NTFS trailing space"],
    [".git . .", "NTFS trailing dots and spaces"],
    ["git~1.", "NTFS short name, trailing dot"],
    [".git::$INDEX_ALLOCATION", "NTFS alternate data stream"],
    [".g\u200Cit", "HFS+ ignorable inside"],
    ["\uFEFF.git", "HFS+ ignorable before"],
    [".GI\u200DT\u206A", "HFS+ ignorables, upper case"],
    ["a".repeat(256), "256 bytes"],
    ["é".repeat(128), "256 bytes of two-byte characters"],
    ["\u{1F600}".repeat(64) + "a", "257 bytes of four-byte characters"],
    ["x".repeat(5000), "5,000 characters"]
  ]
  for (const [name, why] of unsafe) {
    it(`refuses an entry name no checkout can write safely: ${why}`, () => {
      expect(checkEntryName(name).ok).toBe(false)
      const entries = [blob(name)]
      expect(checkTree({ hash: hashTree(entries), entries }).ok).toBe(false)
    })
  }

  const safe: ReadonlyArray<readonly [string, string]> = [
    [".gitignore", "a dot file starting with .git"],
    [".github", ".github"],
    [".git-blame-ignore-revs", "another .git dot file"],
    ["git", "git without the dot"],
    ["git~2", "not git's short name"],
    ["x.git", ".git as a suffix"],
    ["...", "three dots"],
    ["a".repeat(MAX_ENTRY_NAME_BYTES), "255 bytes"],
    ["é".repeat(127) + "a", "255 bytes of mixed widths"],
    ["C:", "a colon"]
  ]
  for (const [name, why] of safe) {
    it(`accepts a name checkouts can write: ${why}`, () => {
      expect(checkEntryName(name)).toEqual({ ok: true })
    })
  }

  it("isDotGit follows git's HFS+ and NTFS rules", () => {
    expect([".git", ".GiT", "git~1", ".git  ..", ".git:x", "\u200C.git"].every(isDotGit)).toBe(true)
    expect([".gitx", ".git x", "git~1x", "git", ".gi"].some(isDotGit)).toBe(false)
  })

  it("isDotGrove takes every name a checkout's file system could take for .grove", () => {
    expect([".grove", ".GROVE", "grove~1", ".grove .", ".grove:x", "\u200C.grove"].every(isDotGrove)).toBe(true)
    expect([".grovex", "grove", ".grov", ".groves", "x.grove"].some(isDotGrove)).toBe(false)
    // HFS+ ignorables inside the name, and in other names (not taken for it).
    expect([".gr\u200Dove", ".GRO\uFEFFVE"].every(isDotGrove)).toBe(true)
    expect(["caf\u00e9", "\u200Cgrove", "gro\u200Cve.txt"].some(isDotGrove)).toBe(false)
  })

  it("dotGroveIn finds a .grove segment at any depth, and says where", () => {
    expect(dotGroveIn(".grove/config.json")).toBe(".grove")
    expect(dotGroveIn("d/.grove/x")).toBe("d/.grove")
    expect(dotGroveIn("D/.GROVE/x")).toBe("D/.GROVE")
    expect(dotGroveIn("a/b/grove~1")).toBe("a/b/grove~1")
    expect(dotGroveIn("a/.gr\u200Cove/b/.grove/c")).toBe("a/.gr\u200Cove")
    expect(dotGroveIn("d/.grove")).toBe("d/.grove")
    for (const path of ["a.txt", "grove/x", "d/.grovex/y", "x.grove/y", "caf\u00e9/.groves", "groves/grove.txt"]) {
      expect(dotGroveIn(path), path).toBeUndefined()
    }
    // Other scripts: found below them, and a path without one is told by the one test (no segment looked at).
    expect(dotGroveIn("\u6587\u6863/.GROVE/\u7b14\u8bb0.txt")).toBe("\u6587\u6863/.GROVE")
    expect(dotGroveIn("\u6587\u6863/\u7b14\u8bb0.txt")).toBeUndefined()
    expect(mayHoldDotGrove("\u6587\u6863/\u7b14\u8bb0.txt\0caf\u00e9/\u0433\u0440\u043e\u0432\u0435")).toBe(false)
    expect(["x/.grove", "a\0b/Grove~1", "\u6587/.gr\u200Cove"].every(mayHoldDotGrove)).toBe(true)
  })

  it("no code point but ASCII lower-cases to a letter of '.grove~1', so the prefilter misses no spelling", () => {
    const letters = new Set(".grove~1")
    for (let cp = 0x80; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue
      for (const c of String.fromCodePoint(cp).toLowerCase()) if (letters.has(c)) expect.fail(`U+${cp.toString(16)}`)
    }
  })

  it("refuses a symlinked .gitmodules, as git fsck does, and allows a regular one", () => {
    for (const name of [".gitmodules", ".GITMODULES", "gitmod~1", ".gitmodules .", "gi7eba~4"]) {
      expect(checkTreeEntries([blob(name, "symlink")]).ok, name).toBe(false)
    }
    expect(checkTreeEntries([blob(".gitmodules")]).ok).toBe(true)
  })

  it("still reads stored trees by the wire rule only, so objects stored earlier stay readable", () => {
    expect(checkWireEntryName("a\\b").ok).toBe(true)
    expect(checkWireEntryName(".GIT").ok).toBe(true)
    const h = "a".repeat(64)
    expect(decodeTree(`blob\ta\\b\t${h}\tregular`)).toEqual([{ name: "a\\b", kind: "blob", hash: h, mode: "regular" }])
    expect(decodeTree(`blob\t..\t${h}\tregular`)).toBeUndefined()
  })

  it("pairs kinds with modes", () => {
    for (const mode of ["regular", "executable", "symlink"]) expect(checkEntryMode("blob", mode).ok).toBe(true)
    expect(checkEntryMode("tree", "tree").ok).toBe(true)
    for (const [kind, mode] of [["blob", "tree"], ["tree", "regular"], ["blob", "Regular"], ["blob", "755"], ["commit", "tree"], ["blob", undefined]]) {
      expect(checkEntryMode(kind, mode).ok, `${kind} ${mode}`).toBe(false)
    }
  })

  it("checks a whole tree: names, modes, hashes, uniqueness", () => {
    expect(checkTreeEntries([]).ok).toBe(true)
    expect(checkTreeEntries([tree("src"), blob("src.ts"), blob("run", "executable")]).ok).toBe(true)
    expect(checkTreeEntries([blob("a"), blob("a", "executable")])).toEqual({ ok: false, reason: "duplicate entry name 'a'" })
    // A file and a directory at the same path.
    expect(checkTreeEntries([blob("a"), tree("a")]).ok).toBe(false)
    expect(checkTreeEntries([blob("a/b")]).ok).toBe(false)
    expect(checkTreeEntries([blob("a", "regular", HELLO.toUpperCase())]).ok).toBe(false)
    expect(checkTreeEntries([{ name: "a", kind: "tree", hash: EMPTY, mode: "regular" }]).ok).toBe(false)
  })
})

describe("Tree.checkTree", () => {
  it("accepts a tree whose entries hash to its claimed hash and rejects the rest", () => {
    const entries = [blob("a"), tree("d")]
    expect(checkTree({ hash: hashTree(entries), entries }).ok).toBe(true)
    expect(checkTree({ hash: EMPTY, entries: [] }).ok).toBe(true)
    expect(checkTree({ hash: EMPTY, entries }).ok).toBe(false)
    expect(checkTree({ hash: hashTree(entries).toUpperCase(), entries }).ok).toBe(false)
    const dup = [blob("a"), blob("a")]
    expect(checkTree({ hash: hashTree(dup), entries: dup }).ok).toBe(false)
  })

  it("decodeTree inverts encodeTree and refuses text that is not canonical", () => {
    const h = "a".repeat(64)
    const entries = [
      { name: "b", kind: "blob" as const, hash: h, mode: "executable" as const },
      { name: "a", kind: "tree" as const, hash: h, mode: "tree" as const }
    ]
    const body = encodeTree(entries)
    expect(decodeTree(body)).toEqual([entries[1], entries[0]])
    expect(decodeTree("")).toEqual([])
    expect(decodeTree("blob\tx\t" + h)).toBeUndefined()
    expect(decodeTree("blob\tx\t" + h + "\ttree")).toBeUndefined()
    expect(decodeTree("link\tx\t" + h + "\tregular")).toBeUndefined()
    expect(decodeTree("blob\tx\t" + h + "\tregular\nblob\tx\t" + h + "\tregular")).toBeUndefined()
  })
})
