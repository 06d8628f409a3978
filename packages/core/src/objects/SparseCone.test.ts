import { describe, expect, it } from "@effect/vitest"
import { blobsInCone, inCone, parseCone, reachesCone } from "./SparseCone.ts"

describe("SparseCone", () => {
  it("parses the client's comma list: trimmed, slashes normalized, blanks and repeats dropped", () => {
    expect(parseCone(" src/ ,\\docs\\api,src,,")).toEqual({ ok: true, prefixes: ["src", "docs/api"] })
    expect(parseCone(" , ")).toEqual({ ok: true, prefixes: undefined })
    expect(parseCone("a/../b")).toMatchObject({ ok: false })
    expect(parseCone("a\u0000b")).toMatchObject({ ok: false })
    expect(parseCone(Array.from({ length: 300 }, (_, i) => `p${i}`).join(","))).toMatchObject({ ok: false })
  })

  it("covers a prefix and what is under it on a path boundary only", () => {
    expect(inCone(["src"], "src")).toBe(true)
    expect(inCone(["src"], "src/a.ts")).toBe(true)
    expect(inCone(["src"], "srcx/a.ts")).toBe(false)
    expect(inCone(["src/lib"], "src/a.ts")).toBe(false)
    expect(reachesCone(["src/lib"], "src")).toBe(true)
    expect(reachesCone(["src/lib"], "docs")).toBe(false)
  })

  it("finds the blobs at covered paths, including a blob also found outside the cone", () => {
    const trees = [
      { hash: "root", entries: [{ name: "src", kind: "tree", hash: "t-src" }, { name: "docs", kind: "tree", hash: "t-docs" }, { name: "top.txt", kind: "blob", hash: "b-top" }] },
      { hash: "t-src", entries: [{ name: "a.ts", kind: "blob", hash: "b-a" }, { name: "same.txt", kind: "blob", hash: "b-same" }] },
      { hash: "t-docs", entries: [{ name: "same.txt", kind: "blob", hash: "b-same" }, { name: "d.md", kind: "blob", hash: "b-d" }] }
    ]
    expect([...blobsInCone(["src"], ["root"], trees)].sort()).toEqual(["b-a", "b-same"])
    expect([...blobsInCone(["docs/d.md", "top.txt"], ["root"], trees)].sort()).toEqual(["b-d", "b-top"])
    expect(blobsInCone(["nothing"], ["root"], trees).size).toBe(0)
  })
})
