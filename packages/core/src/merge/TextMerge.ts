/**
 * Text merge for the client's pull (diff3, git-style markers), the binary test that decides
 * whether a file gets markers at all, and unified diffs for `grove diff`.
 */
import { diffBlocks, matchLines, splitLines } from "./LineDiff.ts"
import type { Block } from "./LineDiff.ts"

export interface MergeTextResult {
  /** The merged text; conflicting hunks sit between `<<<<<<<`, `=======` and `>>>>>>>` lines. */
  readonly text: string
  /** How many conflicting hunks were written; 0 is a clean merge. */
  readonly conflicts: number
}

const sameLines = (x: ReadonlyArray<string>, y: ReadonlyArray<string>): boolean =>
  x.length === y.length && x.every((line, i) => line === y[i])

/** Markers follow the file's own line ending, judged by its first line. */
const lineEnding = (text: string): string => {
  const i = text.indexOf("\n")
  return i > 0 && text[i - 1] === "\r" ? "\r\n" : "\n"
}

/**
 * Line-based three-way merge. The base is matched against each side (Myers diff); where both
 * sides agree with the base the line is kept; a stretch changed on one side only takes that
 * side; a stretch changed identically on both sides is taken once; anything else is a conflict.
 * Lines both sides share at the edges of a conflict are written outside its markers. Adjacent
 * (touching) edits conflict, as in git.
 */
export const mergeText = (base: string, ours: string, theirs: string, labels: { readonly ours: string; readonly theirs: string }): MergeTextResult => {
  const b = splitLines(base)
  const o = splitLines(ours)
  const t = splitLines(theirs)
  const toOurs = matchLines(b, o)
  const toTheirs = matchLines(b, t)
  const eol = lineEnding(ours.includes("\n") ? ours : theirs.includes("\n") ? theirs : base)
  const out: Array<string> = []
  let conflicts = 0
  const emit = (lines: ReadonlyArray<string>): void => {
    for (const line of lines) out.push(line)
  }
  // A marker must start a line, even after a last line without its newline.
  const marker = (text: string): void => {
    const last = out.at(-1)
    if (last !== undefined && !last.endsWith("\n")) out.push(eol)
    out.push(text + eol)
  }
  let i = 0
  let x = 0
  let y = 0
  for (;;) {
    // The next base line kept by both sides ends the current unstable stretch.
    let j = i
    while (j < b.length && (toOurs[j] === -1 || toTheirs[j] === -1)) j++
    const oEnd = j < b.length ? toOurs[j] as number : o.length
    const tEnd = j < b.length ? toTheirs[j] as number : t.length
    const bs = b.slice(i, j)
    const os = o.slice(x, oEnd)
    const ts = t.slice(y, tEnd)
    if (sameLines(os, bs)) emit(ts)
    else if (sameLines(ts, bs) || sameLines(os, ts)) emit(os)
    else {
      let head = 0
      while (head < os.length && head < ts.length && os[head] === ts[head]) head++
      let tail = 0
      while (tail < os.length - head && tail < ts.length - head && os[os.length - 1 - tail] === ts[ts.length - 1 - tail]) tail++
      emit(os.slice(0, head))
      marker(`<<<<<<< ${labels.ours}`)
      emit(os.slice(head, os.length - tail))
      marker("=======")
      emit(ts.slice(head, ts.length - tail))
      marker(`>>>>>>> ${labels.theirs}`)
      emit(os.slice(os.length - tail))
      conflicts++
    }
    if (j === b.length) break
    out.push(b[j] as string)
    i = j + 1
    x = oEnd + 1
    y = tEnd + 1
  }
  return { text: out.join(""), conflicts }
}

/** Binary as git judges it: a NUL byte within the first 8000 bytes. Binary files conflict whole, without markers. */
export const isBinary = (bytes: Uint8Array): boolean => {
  const n = Math.min(bytes.length, 8000)
  for (let i = 0; i < n; i++) if (bytes[i] === 0) return true
  return false
}

export interface UnifiedDiffOptions {
  /** Written after `--- `, e.g. `a/src/main.ts`. */
  readonly oldLabel: string
  /** Written after `+++ `. */
  readonly newLabel: string
  /** Unchanged lines shown around each change; 3 by default. */
  readonly context?: number | undefined
}

const range = (start: number, count: number): string =>
  count === 1 ? `${start + 1}` : count === 0 ? `${start},0` : `${start + 1},${count}`

/**
 * A unified diff (`diff -u` / `git diff` format): "" when the texts are equal. Hunks closer than
 * twice the context merge into one; a last line without a newline is followed by
 * `\ No newline at end of file`. Lines are written as they are (a CRLF file shows its `\r`).
 */
export const unifiedDiff = (oldText: string, newText: string, options: UnifiedDiffOptions): string => {
  const a = splitLines(oldText)
  const b = splitLines(newText)
  const context = Math.max(0, options.context ?? 3)
  const changes = diffBlocks(a, b).filter((block) => !block.equal)
  if (changes.length === 0) return ""
  const out: Array<string> = [`--- ${options.oldLabel}\n`, `+++ ${options.newLabel}\n`]
  const line = (prefix: string, text: string): void => {
    if (text.endsWith("\n")) out.push(prefix + text)
    else out.push(`${prefix}${text}\n\\ No newline at end of file\n`)
  }
  for (let first = 0; first < changes.length;) {
    let last = first
    while (last + 1 < changes.length && (changes[last + 1] as Block).aStart - (changes[last] as Block).aEnd <= 2 * context) last++
    const head = changes[first] as Block
    const tail = changes[last] as Block
    const lead = Math.min(context, head.aStart)
    const aFrom = head.aStart - lead
    const bFrom = head.bStart - lead
    const trail = Math.min(context, a.length - tail.aEnd)
    const aTo = tail.aEnd + trail
    const bTo = tail.bEnd + trail
    out.push(`@@ -${range(aFrom, aTo - aFrom)} +${range(bFrom, bTo - bFrom)} @@\n`)
    let at = aFrom
    for (let c = first; c <= last; c++) {
      const change = changes[c] as Block
      for (; at < change.aStart; at++) line(" ", a[at] as string)
      for (let k = change.aStart; k < change.aEnd; k++) line("-", a[k] as string)
      for (let k = change.bStart; k < change.bEnd; k++) line("+", b[k] as string)
      at = change.aEnd
    }
    for (; at < aTo; at++) line(" ", a[at] as string)
    first = last + 1
  }
  return out.join("")
}
