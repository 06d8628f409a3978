/**
 * Local commits (checkpoints without a message): the working tree becomes a
 * snapshot, its trees are stored, the blobs it adds are copied into the
 * object store, and the commit is appended to the branch's unpushed commits.
 */
import type { ApiSync } from "@grove/api"
import { Merge, Objects } from "@grove/core"
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { crashPoint } from "../CrashPoints.ts"
import { failure } from "../Failures.ts"
import { io } from "./Io.ts"
import type { RepoState } from "./State.ts"
import { currentBranch, withBranch } from "./State.ts"
import type { CliFailure } from "../Failures.ts"
import type { WorkIndex } from "./TreeStatus.ts"
import type { Previous } from "./TreeBuild.ts"
import { buildTreesFrom } from "./TreeBuild.ts"
import { indexSnapshot } from "./TreeStatus.ts"
import type { Snapshot } from "./WorkingTree.ts"
import { keepWithheld, readWithheld } from "./Withheld.ts"
import { readIndex, scan, writeIndex } from "./WorkingTree.ts"
import type { Workspace } from "./Workspace.ts"
import { saveState } from "./Workspace.ts"

type FileChange = Objects.FileChanges.FileChange

export const EMPTY_SNAPSHOT: Snapshot = new Map()

/** The files of a commit (the empty snapshot for none). */
export const commitSnapshot = Effect.fn("Commit.snapshot")(function*(workspace: Workspace, hash: string | null) {
  if (hash === null) return EMPTY_SNAPSHOT
  const stored = yield* workspace.objects.readCommit(hash)
  if (stored === undefined) return yield* failure(`commit ${hash} is missing from the checkout (run grove pull)`, "missing_object")
  return yield* workspace.objects.snapshot(stored.commit.manifest_hash)
})

/**
 * The files of `hash`, from the index when it holds exactly that commit (no tree is read then). With
 * withheld files (Withheld.ts) the index holds only those on disk: the commit's trees are read instead.
 */
export const baseSnapshot = (workspace: Workspace, index: WorkIndex, hash: string | null): Effect.Effect<Snapshot, CliFailure> =>
  hash !== null && index.base === hash && readWithheld(workspace.root).size === 0
    ? Effect.succeed(indexSnapshot(index))
    : commitSnapshot(workspace, hash)

/** A core file change in the wire shape: optional fields only when set. */
export const toWireChange = (change: FileChange): ApiSync.FileChangeData => ({
  path: change.path,
  change_type: change.change_type,
  old_blob_hash: change.old_blob_hash,
  new_blob_hash: change.new_blob_hash,
  ...(change.old_path == null ? {} : { old_path: change.old_path }),
  ...(change.old_mode == null ? {} : { old_mode: change.old_mode }),
  ...(change.new_mode == null ? {} : { new_mode: change.new_mode })
})

/** Now, in nanoseconds truncated to microseconds as the Oak client's commits are. */
export const nowNanos = (): bigint => BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() / 1000n % 1000n) * 1000n

const CONFLICT_MARKER = /^(<<<<<<<|>>>>>>>) /m

/**
 * Stores a snapshot's trees; answers the root, the trees that were new here and every directory's
 * tree hash. With `previous` (the parent's files and directory hashes) only changed directories are rebuilt.
 */
export const storeTrees = Effect.fn("Commit.storeTrees")(function*(workspace: Workspace, snapshot: Snapshot, previous?: Previous) {
  const built = buildTreesFrom(snapshot, previous)
  if (!built.ok) return yield* failure(`cannot commit: ${built.reason}`, "invalid_tree")
  const created: Array<string> = []
  for (const [hash, entries] of built.trees) if (yield* workspace.objects.writeTree(hash, entries)) created.push(hash)
  return { root: built.root, created, dirs: built.dirs }
})

export interface CommitResult {
  readonly state: RepoState
  /** The new commit, or undefined when nothing changed. */
  readonly commit: ApiSync.CommitData | undefined
  readonly changes: ReadonlyArray<FileChange>
}

/**
 * Commits the working tree on the current branch. With a merge in progress the commit gets its
 * two parents, and files that had conflicts must be free of conflict markers.
 */
export const commitWorkingTree = Effect.fn("Commit.workingTree")(function*(workspace: Workspace, state: RepoState) {
  const { objects, root } = workspace
  const branch = currentBranch(state)
  const merge = state.merge?.branch === branch.name ? state.merge : undefined
  const index = yield* readIndex(root)
  const scanned = yield* scan(root, index)
  if (scanned.invalid.length > 0) {
    const list = scanned.invalid.slice(0, 5).map((i) => `${i.path}: ${i.reason}`).join("; ")
    return yield* failure(`cannot commit ${scanned.invalid.length} path(s): ${list}`, "invalid_path")
  }
  const parent = merge?.parent ?? branch.head
  if (merge === undefined && parent !== null && index.base === parent && scanned.unchanged) {
    // The tree is the parent's, file for file: nothing to diff. The index is written again only when
    // some directory had to be read (its listing is kept for the next walk).
    if (!scanned.foldersKept) yield* writeIndex(root, scanned.files, parent, index.dirs, scanned.folders, scanned.watchToken)
    return { state, commit: undefined, changes: [] } satisfies CommitResult
  }
  const before = yield* baseSnapshot(workspace, index, parent)
  // Files the server withheld were never written here: the commit keeps them as they are.
  const snapshot = keepWithheld(before, scanned.snapshot, readWithheld(root))
  const changes = Merge.TreeDiff.diffSnapshots(before, snapshot)
  const parentDirs = index.base === parent ? index.dirs : undefined
  if (changes.length === 0 && merge === undefined) {
    yield* writeIndex(root, scanned.files, parent, parentDirs, scanned.folders, scanned.watchToken)
    return { state, commit: undefined, changes } satisfies CommitResult
  }
  if (merge !== undefined) {
    const marked: Array<string> = []
    for (const file of merge.conflicts) {
      if (scanned.snapshot.get(file)?.mode !== "regular" && scanned.snapshot.get(file)?.mode !== "executable") continue
      const text = yield* io(`cannot read ${file}`, () => fs.readFile(path.join(root, file), "utf8"))
      if (CONFLICT_MARKER.test(text)) marked.push(file)
    }
    if (marked.length > 0) {
      return yield* failure(`resolve the conflicts first; markers remain in: ${marked.join(", ")}`, "unresolved_conflicts", { conflict_paths: marked })
    }
  }
  const previous = parentDirs !== undefined && parentDirs.size > 0 ? { snapshot: before, dirs: parentDirs } : undefined
  const { created, dirs, root: manifest } = yield* storeTrees(workspace, snapshot, previous)
  yield* crashPoint("commit:trees")
  // Keep a copy of every blob this commit introduces: that copy, not the file, is what gets pushed.
  const known = new Set([...before.values()].map((f) => f.hash))
  const toKeep = new Map<string, string>()
  for (const change of changes) {
    const hash = change.new_blob_hash
    if (hash !== null && !known.has(hash) && !toKeep.has(hash)) toKeep.set(hash, change.path)
  }
  yield* Effect.forEach(toKeep, ([hash, file]) =>
    Effect.gen(function*() {
      if (yield* objects.hasBlob(hash)) return
      const absolute = path.join(root, file)
      if (scanned.snapshot.get(file)?.mode === "symlink") {
        const target = yield* io(`cannot read link ${file}`, () => fs.readlink(absolute))
        yield* objects.keepBlobBytes(hash, new TextEncoder().encode(target))
      } else if (!(yield* objects.keepBlob(hash, absolute))) {
        return yield* failure(`${file} changed while it was being committed; run grove commit again`, "changed_during_commit")
      }
    }), { concurrency: 16, discard: true })
  yield* crashPoint("commit:blobs")
  const fields = {
    branch_name: branch.name,
    parent_hash: parent,
    merge_parent_hash: merge?.merge_parent ?? null,
    manifest_hash: manifest,
    author: state.user,
    message: null,
    timestamp: nowNanos()
  }
  const commit: ApiSync.CommitData = {
    hash: Objects.Commit.hashCommit(fields),
    branch_name: branch.name,
    parent_hash: parent,
    ...(merge === undefined ? {} : { merge_parent_hash: merge.merge_parent }),
    manifest_hash: manifest,
    author: state.user,
    timestamp: Objects.Timestamp.formatTimestamp(fields.timestamp),
    files: changes.map(toWireChange)
  }
  yield* objects.writeCommit({ commit, new_trees: created })
  const next: RepoState = {
    ...withBranch(state, { ...branch, head: commit.hash, unpushed: [...branch.unpushed, commit.hash] }),
    merge: undefined
  }
  yield* saveState(workspace, next)
  yield* crashPoint("commit:saved")
  yield* writeIndex(root, scanned.files, commit.hash, dirs, scanned.folders, scanned.watchToken)
  return { state: next, commit, changes } satisfies CommitResult
})
