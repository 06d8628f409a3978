import { describe, expect, it } from "@effect/vitest"
import { Objects } from "@grove/core"
import { blobsForTextMerge, planMerge } from "./Merging.ts"

const text = new Map<string, Uint8Array>()
const file = (content: string | Uint8Array, mode: "regular" | "executable" | "symlink" = "regular") => {
  const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content
  const hash = Objects.Blake3.hash(bytes)
  text.set(hash, bytes)
  return { hash, mode }
}
const snap = (entries: Record<string, { hash: string; mode: "regular" | "executable" | "symlink" }>) => new Map(Object.entries(entries))
const labels = { ours: "ours", theirs: "theirs" }

describe("planMerge", () => {
  it("merges edits of different lines cleanly and takes one-sided changes", () => {
    const base = snap({ "a.txt": file("1\n2\n3\n"), "b.txt": file("b\n") })
    const ours = snap({ "a.txt": file("one\n2\n3\n"), "b.txt": file("b\n") })
    const theirs = snap({ "a.txt": file("1\n2\nthree\n"), "b.txt": file("B\n"), "c.txt": file("new\n") })
    const plan = planMerge(base, ours, theirs, (h) => text.get(h), labels)
    expect(plan.conflicts).toEqual([])
    expect(plan.writes.get("a.txt")).toBe("one\n2\nthree\n")
    expect(plan.target.get("b.txt")).toEqual(theirs.get("b.txt"))
    expect(plan.target.get("c.txt")).toEqual(theirs.get("c.txt"))
  })

  it("writes conflict markers for the same line edited on both sides", () => {
    const base = snap({ "a.txt": file("1\n2\n3\n") })
    const ours = snap({ "a.txt": file("1\nours\n3\n") })
    const theirs = snap({ "a.txt": file("1\ntheirs\n3\n") })
    expect(blobsForTextMerge([{ path: "a.txt", kind: "content" }], base, ours, theirs)).toHaveLength(3)
    const plan = planMerge(base, ours, theirs, (h) => text.get(h), labels)
    expect(plan.conflicts.map((c) => c.path)).toEqual(["a.txt"])
    expect(plan.writes.get("a.txt")).toMatch(/^<<<<<<< ours\n1?/m)
    expect(plan.writes.get("a.txt")).toContain("theirs\n")
  })

  it("keeps ours for binary files and delete/modify clashes, and reports them", () => {
    const base = snap({ "bin": file(new Uint8Array([0, 1, 2])), "gone.txt": file("x\n") })
    const ours = snap({ "bin": file(new Uint8Array([0, 1, 3])), "gone.txt": file("x changed\n") })
    const theirs = snap({ "bin": file(new Uint8Array([0, 1, 4])) })
    const plan = planMerge(base, ours, theirs, (h) => text.get(h), labels)
    expect(plan.conflicts.map((c) => [c.path, c.kind])).toEqual([["bin", "binary"], ["gone.txt", "modify_delete"]])
    expect(plan.target.get("bin")).toEqual(ours.get("bin"))
    expect(plan.writes.size).toBe(0)
  })
})
