/**
 * What fsck finds and counts, and how it says so: one line per problem as it is found (text, or a
 * JSON object per line with `--json`), then the summary. Problems are written as they are found,
 * never gathered, so a badly damaged store does not grow fsck's memory.
 */
import { Effect } from "effect"

/** What is wrong: a reference to nothing, bytes that do not hash to their name, a row that cannot be read back. */
export type ProblemKind = "missing" | "corrupt" | "malformed" | "unreadable"

export type ObjectType = "commit" | "tree" | "blob" | "chunk" | "pack" | "release" | "ci-log" | "ci-cache"

export interface Problem {
  readonly kind: ProblemKind
  readonly object: ObjectType
  /** Its hash (or content address). */
  readonly name: string
  /** Whose it is: `owner/repo` for commits, the organization's slug for trees, blobs and chunks, the namespace otherwise. */
  readonly owner: string
  /** The row or object that points at it (`branch main of alice/site`, `tree <hash>`, ...). */
  readonly referencedBy: string
  readonly detail: string
}

export interface Counts {
  repositories: number
  branches: number
  commits: number
  trees: number
  blobs: number
  chunks: number
  /** Object-store objects read whole (chunks stored alone, packs, releases, CI objects, blobs re-read). */
  objects: number
  bytes: number
  packs: number
  stages: number
  releases: number
  ciObjects: number
}

export interface Summary {
  readonly counts: Counts
  readonly problems: Readonly<Record<ProblemKind, number>>
  readonly durationMs: number
}

export const emptyCounts = (): Counts => ({
  repositories: 0,
  branches: 0,
  commits: 0,
  trees: 0,
  blobs: 0,
  chunks: 0,
  objects: 0,
  bytes: 0,
  packs: 0,
  stages: 0,
  releases: 0,
  ciObjects: 0
})

export const totalProblems = (summary: Summary): number => Object.values(summary.problems).reduce((a, b) => a + b, 0)

export const problemLine = (p: Problem): string =>
  `${p.kind.padEnd(10)} ${p.object} ${p.name} (${p.owner}), referenced by ${p.referencedBy}: ${p.detail}`

const mib = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(1)} MiB`

export const summaryLine = (s: Summary): string => {
  const c = s.counts
  const total = totalProblems(s)
  const found = total === 0
    ? "no problems"
    : `${total} problem${total === 1 ? "" : "s"} (${
      Object.entries(s.problems).filter(([, n]) => n > 0).map(([kind, n]) => `${n} ${kind}`).join(", ")
    })`
  return `fsck: ${c.repositories} repositories, ${c.branches} branch heads, ${c.commits} commits, ${c.trees} trees, ` +
    `${c.blobs} blobs, ${c.chunks} chunks (${c.packs} packs), ${c.stages} staged pushes, ${c.releases} releases, ` +
    `${c.ciObjects} CI objects; ${c.objects} objects read (${mib(c.bytes)}) in ${(s.durationMs / 1000).toFixed(1)} s: ${found}\n`
}

/** Writes each problem and the summary to `write`: text lines, or JSON lines (`{"problem": ...}`, then `{"summary": ...}`). */
export const reporter = (format: "text" | "json", write: (line: string) => void) => ({
  problem: (p: Problem) => Effect.sync(() => write(format === "json" ? `${JSON.stringify({ problem: p })}\n` : `${problemLine(p)}\n`)),
  summary: (s: Summary) =>
    Effect.sync(() => write(format === "json" ? `${JSON.stringify({ summary: { ...s, ok: totalProblems(s) === 0 } })}\n` : summaryLine(s)))
})
