import { describe, expect, it } from "@effect/vitest"
import { hash } from "./Blake3.ts"
import { checkEntryMode, checkEntryName, checkTree, checkTreeEntries, compareNames, decodeTree, encodeTree, hashTree } from "./Tree.ts"
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
    for (const good of ["a", "README.md", ".gitignore", "...", "a b", "\\back", "naïve", "\u{1F600}", "a".repeat(255)]) {
      expect(checkEntryName(good).ok, good).toBe(true)
    }
    for (const bad of ["", ".", "..", "a/b", "/", "a\tb", "a\nb", "a\0b", "a\rb", "a\u001bb", "a\u007f", "a\u0085", "\uD800"]) {
      expect(checkEntryName(bad).ok, JSON.stringify(bad)).toBe(false)
    }
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
