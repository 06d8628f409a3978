import { describe, expect, it } from "@effect/vitest"
import { splitLines } from "./LineDiff.ts"
import { seeded } from "./Random.testing.ts"
import { isBinary, mergeText, unifiedDiff } from "./TextMerge.ts"
import { growth } from "../Growth.testing.ts"

const labels = { ours: "HEAD", theirs: "origin/main" }
const merge = (base: string, ours: string, theirs: string) => mergeText(base, ours, theirs, labels)
const lines = (...items: Array<string>): string => items.map((l) => `${l}\n`).join("")

describe("TextMerge.mergeText", () => {
  it("merges edits that do not touch", () => {
    const base = lines("a", "b", "c", "d", "e")
    expect(merge(base, lines("A", "b", "c", "d", "e"), lines("a", "b", "c", "d", "E"))).toEqual({ text: lines("A", "b", "c", "d", "E"), conflicts: 0 })
    expect(merge(base, lines("a", "b", "c", "d", "e", "f"), lines("x", "a", "b", "c", "d", "e"))).toEqual({ text: lines("x", "a", "b", "c", "d", "e", "f"), conflicts: 0 })
    expect(merge(base, lines("a", "c", "d", "e"), lines("a", "b", "c", "d", "e", "z"))).toEqual({ text: lines("a", "c", "d", "e", "z"), conflicts: 0 })
  })

  it("takes one side's change, and an identical change once", () => {
    const base = lines("a", "b")
    expect(merge(base, base, lines("a", "B"))).toEqual({ text: lines("a", "B"), conflicts: 0 })
    expect(merge(base, lines("a", "B"), base)).toEqual({ text: lines("a", "B"), conflicts: 0 })
    expect(merge(base, lines("a", "B"), lines("a", "B"))).toEqual({ text: lines("a", "B"), conflicts: 0 })
  })

  it("writes git-style markers around each conflicting hunk only", () => {
    const base = lines("1", "2", "3", "4", "5", "6", "7")
    const result = merge(base, lines("1", "two", "3", "4", "5", "six", "7"), lines("1", "TWO", "3", "4", "5", "6", "7"))
    expect(result).toEqual({
      text: lines("1", "<<<<<<< HEAD", "two", "=======", "TWO", ">>>>>>> origin/main", "3", "4", "5", "six", "7"),
      conflicts: 1
    })
    const two = merge(base, lines("x", "2", "3", "4", "5", "6", "y"), lines("X", "2", "3", "4", "5", "6", "Y"))
    expect(two.conflicts).toBe(2)
    expect(two.text).toBe(lines("<<<<<<< HEAD", "x", "=======", "X", ">>>>>>> origin/main", "2", "3", "4", "5", "6", "<<<<<<< HEAD", "y", "=======", "Y", ">>>>>>> origin/main"))
  })

  it("keeps lines both sides added at the edges of a conflict outside the markers", () => {
    const result = merge(lines("a", "z"), lines("a", "same", "mine", "end", "z"), lines("a", "same", "yours", "end", "z"))
    expect(result.text).toBe(lines("a", "same", "<<<<<<< HEAD", "mine", "=======", "yours", ">>>>>>> origin/main", "end", "z"))
  })

  it("conflicts on touching edits, on different insertions at one place, and on modify/delete", () => {
    expect(merge(lines("a", "b"), lines("A", "b"), lines("a", "B")).conflicts).toBe(1)
    expect(merge(lines("a", "b"), lines("a", "x", "b"), lines("a", "y", "b")).text).toBe(lines("a", "<<<<<<< HEAD", "x", "=======", "y", ">>>>>>> origin/main", "b"))
    expect(merge(lines("a", "b", "c"), lines("a", "c"), lines("a", "B", "c")).text).toBe(lines("a", "<<<<<<< HEAD", "=======", "B", ">>>>>>> origin/main", "c"))
  })

  it("handles empty files", () => {
    expect(merge("", "", "")).toEqual({ text: "", conflicts: 0 })
    expect(merge("", lines("a"), "")).toEqual({ text: lines("a"), conflicts: 0 })
    expect(merge(lines("a"), "", lines("a"))).toEqual({ text: "", conflicts: 0 })
    expect(merge("", lines("a"), lines("b"))).toEqual({ text: lines("<<<<<<< HEAD", "a", "=======", "b", ">>>>>>> origin/main"), conflicts: 1 })
  })

  it("keeps a missing final newline, and puts markers on their own lines after one", () => {
    expect(merge("a\nb\nc", "A\nb\nc", "a\nb\nC")).toEqual({ text: "A\nb\nC", conflicts: 0 })
    expect(merge("a\nb", "a\nb\nmore", "x\na\nb")).toEqual({ text: "x\na\nb\nmore", conflicts: 0 })
    expect(merge("a\nb", "a\nB", "a\nb2")).toEqual({ text: "a\n<<<<<<< HEAD\nB\n=======\nb2\n>>>>>>> origin/main\n", conflicts: 1 })
  })

  it("keeps CRLF line endings as they are, with CRLF markers in a CRLF file", () => {
    const crlf = (...items: Array<string>): string => items.map((l) => `${l}\r\n`).join("")
    expect(merge(crlf("a", "b", "c"), crlf("A", "b", "c"), crlf("a", "b", "C"))).toEqual({ text: crlf("A", "b", "C"), conflicts: 0 })
    expect(merge(crlf("a"), crlf("x"), crlf("y")).text).toBe(crlf("<<<<<<< HEAD", "x", "=======", "y", ">>>>>>> origin/main"))
    // A side that only changed line endings changed every line.
    expect(merge(lines("a", "b"), crlf("a", "b"), lines("a", "b")).text).toBe(crlf("a", "b"))
  })

  it("on random texts: one-sided and identical edits are clean, separate edits merge to both", () => {
    const rnd = seeded(31)
    for (let round = 0; round < 300; round++) {
      const words = Array.from({ length: rnd.int(30) }, () => `w${rnd.int(5)}\n`)
      const edit = (from: ReadonlyArray<string>) => from.flatMap((l) => (rnd.int(5) === 0 ? [] : rnd.int(6) === 0 ? [l, `new${rnd.int(3)}\n`] : [l])).join("")
      const base = words.join("")
      const ours = edit(words)
      const theirs = edit(words)
      expect(merge(base, ours, base)).toEqual({ text: ours, conflicts: 0 })
      expect(merge(base, base, theirs)).toEqual({ text: theirs, conflicts: 0 })
      expect(merge(base, ours, ours)).toEqual({ text: ours, conflicts: 0 })
      // Unique lines in blocks; ours edits even blocks, theirs odd ones, an untouched line between.
      const blocks = Array.from({ length: 2 + rnd.int(6) }, (_, b) => Array.from({ length: 1 + rnd.int(4) }, (_, i) => `b${b}.${i}\n`))
      const join = (pick: (block: Array<string>, b: number) => Array<string>) => blocks.flatMap((block, b) => [...pick(block, b), `anchor${b}\n`]).join("")
      const change = (block: Array<string>) => rnd.pick([[], [...block, "added\n"], block.map((l) => l.toUpperCase()), ["other\n"]])
      const changes = blocks.map(change)
      const expected = join((_block, b) => changes[b] as Array<string>)
      const oursText = join((block, b) => (b % 2 === 0 ? changes[b] as Array<string> : block))
      const theirsText = join((block, b) => (b % 2 === 1 ? changes[b] as Array<string> : block))
      expect(merge(join((block) => block), oursText, theirsText)).toEqual({ text: expected, conflicts: 0 })
    }
  })

  it("merges 10,000-line files with edits on both sides exactly, in time that grows near-linearly with the length", () => {
    const rnd = seeded(32)
    const sides = (lines: number) => {
      const base = Array.from({ length: lines }, (_, i) => `    const value${i % 500} = compute(${i}) // line\n`)
      const ours = [...base]
      const theirs = [...base]
      for (let k = 0; k < lines * 0.03; k++) {
        ours[rnd.int(lines / 2)] = `ours ${k}\n`
        theirs[lines / 2 + rnd.int(lines / 2)] = `theirs ${k}\n`
      }
      return { base, ours, theirs }
    }
    // CPU time of the merge in turns with a quarter-size one in the same process, fastest of five: not a wall-clock bound.
    const merged = ({ base, ours, theirs }: ReturnType<typeof sides>) => {
      const result = merge(base.join(""), ours.join(""), theirs.join(""))
      const half = base.length / 2
      expect(result).toEqual({ text: [...ours.slice(0, half), ...theirs.slice(half)].join(""), conflicts: 0 })
    }
    const [small, large] = [sides(2_500), sides(10_000)]
    const measured = growth(() => merged(small), () => merged(large))
    expect(measured.large, `${measured.large.toFixed(1)} ms vs ${measured.small.toFixed(1)} ms`).toBeLessThan(12 * measured.small + 25)
  })
})

describe("TextMerge.isBinary", () => {
  it("looks for a NUL byte in the first 8000 bytes", () => {
    expect(isBinary(new Uint8Array())).toBe(false)
    expect(isBinary(new TextEncoder().encode("plain text\n"))).toBe(false)
    expect(isBinary(Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x00))).toBe(true)
    const late = new Uint8Array(9000).fill(0x61)
    late[7999] = 0
    expect(isBinary(late)).toBe(true)
    late[7999] = 0x61
    late[8000] = 0
    expect(isBinary(late)).toBe(false)
  })
})

/** Applies a unified diff, checking every context and removed line: proof the diff says what changed. */
const applyPatch = (oldText: string, patch: string): string => {
  const old = splitLines(oldText)
  const out: Array<string> = []
  let at = 0
  const patchLines = patch.split("\n")
  patchLines.pop()
  for (let i = 2; i < patchLines.length; i++) {
    const header = /^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@$/.exec(patchLines[i] as string)
    if (header === null) throw new Error(`bad hunk header: ${patchLines[i]}`)
    const start = Number(header[1]) - (header[2] === "0" ? 0 : 1)
    while (at < start) out.push(old[at++] as string)
    for (i++; i < patchLines.length && !(patchLines[i] as string).startsWith("@@"); i++) {
      const line = patchLines[i] as string
      const noNewline = patchLines[i + 1] === "\\ No newline at end of file"
      const text = line.slice(1) + (noNewline ? "" : "\n")
      if (noNewline) i++
      if (line[0] === "+") out.push(text)
      else {
        if (old[at] !== text) throw new Error(`context mismatch at old line ${at + 1}`)
        if (line[0] === " ") out.push(text)
        at++
      }
    }
    i--
  }
  while (at < old.length) out.push(old[at++] as string)
  return out.join("")
}

describe("TextMerge.unifiedDiff", () => {
  const opts = { oldLabel: "a/f.txt", newLabel: "b/f.txt" }

  it("writes git's format", () => {
    const before = lines("1", "2", "3", "4", "5", "6", "7", "8", "9", "10")
    const after = lines("1", "2", "3", "4", "five", "6", "7", "8", "9", "10", "11")
    expect(unifiedDiff(before, after, opts)).toBe([
      "--- a/f.txt",
      "+++ b/f.txt",
      "@@ -2,9 +2,10 @@",
      " 2", " 3", " 4", "-5", "+five", " 6", " 7", " 8", " 9", " 10", "+11", ""
    ].join("\n"))
    expect(unifiedDiff(before, after, { ...opts, context: 1 })).toBe([
      "--- a/f.txt", "+++ b/f.txt", "@@ -4,3 +4,3 @@", " 4", "-5", "+five", " 6", "@@ -10 +10,2 @@", " 10", "+11", ""
    ].join("\n"))
  })

  it("is empty for equal texts, and covers new, deleted and single-line files", () => {
    expect(unifiedDiff(lines("a"), lines("a"), opts)).toBe("")
    expect(unifiedDiff("", lines("a", "b"), opts)).toBe("--- a/f.txt\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n")
    expect(unifiedDiff(lines("a"), "", opts)).toBe("--- a/f.txt\n+++ b/f.txt\n@@ -1 +0,0 @@\n-a\n")
    expect(unifiedDiff(lines("a"), lines("b"), opts)).toBe("--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\n+b\n")
  })

  it("marks a last line without a newline, and shows CRs as they are", () => {
    expect(unifiedDiff("a\nb", "a\nb\n", opts)).toBe("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n")
    expect(unifiedDiff("a\r\n", "b\r\n", opts)).toBe("--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\r\n+b\r\n")
  })

  it("applies back to the new text (random texts and contexts)", () => {
    const rnd = seeded(33)
    for (let round = 0; round < 400; round++) {
      const make = () => Array.from({ length: rnd.int(40) }, () => `t${rnd.int(6)}`).join("\n") + rnd.pick(["", "\n"])
      const a = make()
      const b = rnd.int(2) === 0 ? make() : a.replace(/t1/g, () => (rnd.int(2) === 0 ? "t1" : "changed"))
      const patch = unifiedDiff(a, b, { ...opts, context: rnd.int(5) })
      expect(patch === "").toBe(a === b)
      if (patch !== "") expect(applyPatch(a, patch)).toBe(b)
    }
  })
})
