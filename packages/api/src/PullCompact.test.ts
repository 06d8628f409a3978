import { describe, expect, it } from "@effect/vitest"
import * as Snapshots from "@grove/core/merge/Snapshots"
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import * as Blake3 from "@grove/core/objects/Blake3"
import { EMPTY_HASH } from "@grove/core/objects/Blake3Backend"
import { type BlobMode, checkTree, type TreeEntry } from "@grove/core/objects/Tree"
import * as fs from "node:fs"
import * as path from "node:path"
import * as PullCompact from "./PullCompact.ts"
import type * as S from "./Sync.ts"
import { toFileChangeData } from "./Sync.ts"

type Files = Record<string, string | { readonly content: string; readonly mode: BlobMode }>

const snapshotOf = (files: Files) =>
  new Map(Object.entries(files).map(([path, spec]) => {
    const { content, mode } = typeof spec === "string" ? { content: spec, mode: "regular" as const } : spec
    return [path, { hash: Blake3.hash(new TextEncoder().encode(content)), mode }]
  }))

/** A plain pull answer of commits, each a snapshot after the one before (files as grove's client writes them). */
const answerOf = (...versions: ReadonlyArray<Files>) => {
  const trees = new Map<string, ReadonlyArray<TreeEntry>>()
  const commits: Array<S.CommitData> = []
  let before = new Map() as ReturnType<typeof snapshotOf>
  let parent: string | null = null
  versions.forEach((files, i) => {
    const snapshot = snapshotOf(files)
    const built = Snapshots.buildTrees(snapshot)
    if (!built.ok) throw new Error(built.reason)
    for (const [hash, entries] of built.trees) trees.set(hash, entries)
    const hash = Blake3.hash(new TextEncoder().encode(`commit ${i}`))
    commits.push({
      hash,
      branch_name: "main",
      parent_hash: parent,
      manifest_hash: built.root,
      author: "tester",
      timestamp: "2026-06-24T00:00:00+00:00",
      // As the pushed JSON stores it: the client's changes, undefined fields dropped.
      files: JSON.parse(JSON.stringify(TreeDiff.diffSnapshots(before, snapshot)))
    })
    before = snapshot
    parent = hash
  })
  const hashes = new Set([...before.values()].map((f) => f.hash))
  const blobs: Array<S.BlobData> = [...hashes].map((hash) => ({ hash, content: [], size: 10, chunks: [{ hash, offset: 0, size: 10 }] }))
  const answer: S.PullResponse = {
    head: parent,
    branch: null,
    branches: [],
    commits,
    blobs,
    trees: [...trees].map(([hash, entries]) => ({ hash, entries }))
  }
  return answer
}

/** What grove's client makes of a compact answer (Fetch: blobs at once, the files once the trees are checked). */
const rebuilt = (compact: PullCompact.CompactPullResponse): S.PullResponse => {
  const lookup = new Map(compact.trees.map((t) => [t.hash, t.entries as ReadonlyArray<TreeEntry>]))
  const files = PullCompact.rebuildFiles(compact.commits, (hash) => lookup.get(hash))
  if (!files.ok) throw new Error(files.reason)
  return { ...compact, commits: files.commits, blobs: PullCompact.expandBlobs(compact.blobs) }
}

/** The answer through the wire both ways, as JSON text. */
const roundTrip = (answer: S.PullResponse) => {
  const plain = JSON.parse(JSON.stringify(answer)) as S.PullResponse
  // Every list long enough to be left out, so these short ones are.
  const compact = JSON.parse(JSON.stringify(PullCompact.compact(plain, 1))) as PullCompact.CompactPullResponse
  return { plain, compact, rebuilt: rebuilt(compact) }
}

const VERSIONS: ReadonlyArray<Files> = [
  { "a.txt": "a", "src/b.ts": "b", "src/deep/c.ts": "c", "run.sh": { content: "#!/bin/sh", mode: "executable" } },
  // modified, mode changed, moved (same name elsewhere), added
  { "a.txt": "a2", "src/b.ts": "b", "lib/c.ts": "c", "run.sh": { content: "#!/bin/sh", mode: "regular" }, "new.md": "n" },
  // renamed to another name, deleted, a directory replaced by a file
  { "a-renamed.txt": "a2", "src/b.ts": "b", "lib": "now a file", "new.md": "n" }
]

describe("the compact pull answer", () => {
  it("leaves out canonical files lists, one-chunk lists and empty contents; rebuilt, it is the plain answer", () => {
    const { compact, plain, rebuilt: back } = roundTrip(answerOf(...VERSIONS))
    expect(compact.commits.every((c) => c.files === undefined)).toBe(true)
    expect(compact.blobs.every((b) => b.chunks === undefined && b.content === undefined)).toBe(true)
    expect(plain.commits.map((c) => c.files.length)).toEqual([4, 4, 4])
    expect(back).toEqual(plain)
    expect(JSON.stringify(compact).length).toBeLessThan(JSON.stringify(plain).length * 0.7)
  })

  it("keeps a files list that is not the canonical one, and one whose parent is not in the answer", () => {
    const answer = answerOf(...VERSIONS)
    const [first, second, third] = answer.commits as [S.CommitData, S.CommitData, S.CommitData]
    // Accepted by a push (the modes are optional, the order free) but not what the canonical list says.
    const oak = {
      ...second,
      files: second.files.map((change) => {
        const { new_mode: _, ...rest } = change
        return rest
      })
    }
    const reordered = { ...third, files: [...third.files].reverse() }
    const { compact, plain, rebuilt: back } = roundTrip({ ...answer, commits: [first, oak, reordered] })
    expect(compact.commits.map((c) => c.files !== undefined)).toEqual([false, true, true])
    expect(back).toEqual(plain)

    // A pull since the first commit: the second's parent is not in the answer.
    const since = roundTrip({ ...answer, commits: [second, third] })
    expect(since.compact.commits.map((c) => c.files !== undefined)).toEqual([true, false])
    expect(since.rebuilt).toEqual(since.plain)
  })

  it("keeps an explicit null, a chunk list of many chunks, an empty blob's empty list and a blob without a list", () => {
    const answer = answerOf(VERSIONS[0]!)
    const [commit] = answer.commits as [S.CommitData]
    const withNull = { ...commit, files: commit.files.map((f, i) => i === 0 ? { ...f, old_path: null } : f) }
    const hash = answer.blobs[0]!.hash
    const blobs: Array<S.BlobData> = [
      { hash, content: [], size: 20, chunks: [{ hash: "1".repeat(64), offset: 0, size: 10 }, { hash: "2".repeat(64), offset: 10, size: 10 }] },
      { hash: Blake3.EMPTY_HASH, content: [], size: 0, chunks: [] },
      { hash: "3".repeat(64), content: [], size: 5 },
      { hash: "4".repeat(64), content: [], size: 5, chunks: [{ hash: "4".repeat(64), offset: 0, size: 5 }], mapping_proof_token: "t" }
    ]
    const { compact, plain, rebuilt: back } = roundTrip({ ...answer, commits: [withNull], blobs })
    expect(compact.commits[0]!.files).toBeDefined()
    expect(compact.blobs.map((b) => [b.content !== undefined, b.chunks?.length])).toEqual([[false, 2], [false, 0], [true, undefined], [false, undefined]])
    expect(back).toEqual(plain)
  })

  it("keeps a list shorter than LEAVE_OUT_FROM: its diff costs more than its JSON", () => {
    const answer = answerOf(...VERSIONS)
    expect(PullCompact.compact(answer).commits.map((c) => c.files !== undefined)).toEqual([true, true, true])
    const many: Files = Object.fromEntries(Array.from({ length: PullCompact.LEAVE_OUT_FROM }, (_, i) => [`d${i % 3}/f${i}`, `${i}`]))
    const long = answerOf(many, { ...many, "d0/f0": "changed" })
    expect(PullCompact.compact(long).commits.map((c) => c.files !== undefined)).toEqual([false, true])
  })

  it("a rebuild that cannot be made is refused, not guessed", () => {
    const answer = answerOf(...VERSIONS)
    const { files: _, ...second } = answer.commits[1]!
    expect(PullCompact.rebuildFiles([second], () => undefined)).toMatchObject({ ok: false, reason: expect.stringContaining("without its parent") })
    const { files: __, ...first } = answer.commits[0]!
    expect(PullCompact.rebuildFiles([first], () => undefined)).toMatchObject({ ok: false, reason: expect.stringContaining("without the trees") })
  })

  it("canonicalFiles is what a push's files list from grove's client holds, in the wire form", () => {
    const before = snapshotOf(VERSIONS[0]!), after = snapshotOf(VERSIONS[1]!)
    const trees = new Map<string, ReadonlyArray<TreeEntry>>()
    const roots = [before, after].map((s) => {
      const built = Snapshots.buildTrees(s)
      if (!built.ok) throw new Error(built.reason)
      for (const [h, e] of built.trees) trees.set(h, e)
      return built.root
    })
    expect(PullCompact.canonicalFiles(roots[0]!, roots[1]!, (h) => trees.get(h)))
      .toEqual(TreeDiff.diffSnapshots(before, after).map(toFileChangeData))
  })

  it("is taken when the Accept lists it without q=0; an answer's content type names it", () => {
    expect(PullCompact.acceptsCompact(PullCompact.ACCEPT)).toBe(true)
    expect(PullCompact.acceptsCompact("application/vnd.grove.pull-compact-v1+json")).toBe(true)
    expect(PullCompact.acceptsCompact("application/json, application/vnd.grove.pull-compact-v1+json;q=0.1")).toBe(true)
    expect(PullCompact.acceptsCompact("application/vnd.grove.pull-compact-v1+json;q=0")).toBe(false)
    expect(PullCompact.acceptsCompact("application/json")).toBe(false)
    expect(PullCompact.acceptsCompact("*/*")).toBe(false)
    expect(PullCompact.acceptsCompact(undefined)).toBe(false)
    expect(PullCompact.isCompact("application/vnd.grove.pull-compact-v1+json; charset=utf-8")).toBe(true)
    expect(PullCompact.isCompact("application/json")).toBe(false)
  })
})

/**
 * compact_v1's wire contract: a server leaves out a list equal to ITS canonicalFiles and a client rebuilds it with ITS
 * own, so the algorithm (core's diffTrees + diffSnapshots, the root commit's walk, path order, rename pairing, which
 * modes are listed, the wire form's keys) may not change under this answer form. The expected lists are literal JSON
 * (PullCompact.fixture.json, written once at 333f75f, the algorithm of 45d0015, and checked by hand): if this fails, the change
 * needs a new form (compact_v2, its own media type and capability value), not a new fixture.
 */
describe("compact_v1's canonical files (pinned)", () => {
  interface Fixture {
    readonly trees: ReadonlyArray<S.TreeData>
    readonly cases: ReadonlyArray<{ readonly about: string; readonly parent_manifest: string | null; readonly manifest: string; readonly files: ReadonlyArray<S.FileChangeData> }>
  }
  const fixture = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, "PullCompact.fixture.json"), "utf8")) as Fixture
  const trees = new Map(fixture.trees.map((t) => [t.hash, t.entries as ReadonlyArray<TreeEntry>]))
  const lookup = (hash: string) => trees.get(hash)

  it("the fixture's trees are real trees, and its cases hold what they are about", () => {
    for (const tree of fixture.trees) expect(checkTree({ hash: tree.hash, entries: tree.entries as ReadonlyArray<TreeEntry> })).toEqual({ ok: true })
    const [root, changes, none] = fixture.cases
    expect(root!.files.map((c) => c.path)).toEqual([
      "README.md", "a-b", "a.txt", "a/x.txt", "a0", "bin/run.sh", "d/f.txt", "f", "gone/deep/x.txt", "link", "mode.txt",
      "old.txt", "src/deep/c.ts", "tolink", "tool.sh", "x/e1", "y/e2", "\u00E9.txt", "\uFF5E.txt", "\u{1F600}.txt"
    ])
    expect(changes!.files.map((c) => [c.change_type, c.old_path ?? null, c.path, c.old_mode ?? null, c.new_mode ?? null])).toEqual([
      ["modified", null, "a.txt", "regular", "regular"],
      ["renamed", "tool.sh", "bin/tool.sh", "regular", "executable"],
      ["added", null, "d", null, "regular"],
      ["renamed", "d/f.txt", "e/f.txt", "regular", "regular"],
      ["deleted", null, "f", "regular", null],
      ["added", null, "f/inner.txt", null, "regular"],
      ["deleted", null, "gone/deep/x.txt", "regular", null],
      ["renamed", "src/deep/c.ts", "lib/c.ts", "regular", "regular"],
      ["added", null, "link2", null, "symlink"],
      ["modified", null, "mode.txt", "regular", "executable"],
      ["added", null, "n/a/b/c.txt", null, "regular"],
      ["renamed", "old.txt", "renamed.txt", "regular", "regular"],
      ["modified", null, "tolink", "regular", "symlink"],
      ["renamed", "y/e2", "z/e2", "regular", "regular"],
      ["renamed", "x/e1", "z/e3", "regular", "regular"],
      ["added", null, "z/e4", null, "regular"]
    ])
    expect(none!.files).toEqual([])
  })

  it("canonicalFiles gives each case's literal list, keys in the same order (fails if the algorithm drifts)", () => {
    for (const c of fixture.cases) {
      expect(JSON.stringify(PullCompact.canonicalFiles(c.parent_manifest, c.manifest, lookup)), c.about).toBe(JSON.stringify(c.files))
    }
    // The root commit's walk gives what the diff from an empty parent does.
    const root = fixture.cases[0]!
    expect(PullCompact.canonicalFiles(EMPTY_HASH, root.manifest, lookup)).toEqual(root.files)
  })

  it("an answer of those commits is compacted and rebuilt to the same text", () => {
    const commits: Array<S.CommitData> = fixture.cases.map((c, i) => ({
      hash: Blake3.hash(new TextEncoder().encode(`fixture ${i}`)),
      branch_name: "main",
      parent_hash: i === 0 ? null : Blake3.hash(new TextEncoder().encode(`fixture ${i - 1}`)),
      manifest_hash: c.manifest,
      author: "tester",
      timestamp: "2026-06-24T00:00:00+00:00",
      files: c.files
    }))
    const { plain, compact, rebuilt: back } = roundTrip({ head: commits.at(-1)!.hash, branch: null, branches: [], commits, blobs: [], trees: fixture.trees })
    // The empty list stays (under any LEAVE_OUT_FROM).
    expect(compact.commits.map((c) => c.files === undefined)).toEqual([true, true, false])
    expect(JSON.stringify(back)).toBe(JSON.stringify(plain))
  })
})
