/**
 * Local work: the working tree's changes against the branch head (what `grove status` lists) and
 * the branch's unpushed commits. Commands that would drop it refuse with what would be lost and
 * how to keep it; and work made on main (which changes only by merge) moves to a new branch.
 */
import { Merge, Objects } from "@grove/core"
import { Effect } from "effect"
import { failure } from "../Failures.ts"
import { baseSnapshot } from "./Commit.ts"
import type { RepoState } from "./State.ts"
import { currentBranch, newBranch, withBranch } from "./State.ts"
import { changeLine } from "./StatusReport.ts"
import { keepWithheld, readWithheld } from "./Withheld.ts"
import { readIndex, recordFolders, scan, writeIndex } from "./WorkingTree.ts"
import type { Workspace } from "./Workspace.ts"

/** The working tree's changes against the head, with the index refreshed. */
export const workingChanges = Effect.fn("LocalWork.workingChanges")(function*(workspace: Workspace, state: RepoState) {
  const branch = currentBranch(state)
  const index = yield* readIndex(workspace.root)
  const scanned = yield* scan(workspace.root, index)
  const base = state.merge?.branch === branch.name ? state.merge.parent : branch.head
  const withheld = readWithheld(workspace.root)
  const { edits } = scanned
  const changes = edits !== undefined && base !== null && index.base === base && withheld.size === 0
    // The index holds the head and the scan names every file not as the index has it: only those are compared.
    ? Merge.TreeDiff.diffSnapshots(new Map(edits.map((e) => [e.path, e.before])), new Map(edits.map((e) => [e.path, e.after])))
    : yield* Effect.map(baseSnapshot(workspace, index, base), (head) =>
      // Withheld files (path permissions) were never written here: their absence is no change.
      Merge.TreeDiff.diffSnapshots(head, keepWithheld(head, scanned.snapshot, withheld)))
  // An index that holds the head exactly is kept as it is (later commands skip the head's trees);
  // otherwise the refreshed one saves re-hashing.
  if (changes.length === 0) {
    if (!scanned.unchanged || index.base !== base || !scanned.foldersKept) {
      yield* writeIndex(workspace.root, scanned.files, base, index.base === base ? index.dirs : undefined, scanned.folders, scanned.watchToken)
    }
  } else if (index.base !== base) yield* writeIndex(workspace.root, scanned.files, null, undefined, scanned.folders)
  // The head's entries stay (the changes are still changes); directories settled since are recorded for the quick status.
  else yield* recordFolders(workspace.root, index, scanned)
  return { branch, scanned, changes }
})

/**
 * Refuses `command` when the current branch has uncommitted changes or unpushed commits that it
 * would drop, unless `discard`. `keep` says how to keep them. Answers the changes and the scan.
 */
export const guardLocalWork = Effect.fn("LocalWork.guard")(function*(
  workspace: Workspace,
  state: RepoState,
  options: { readonly command: string; readonly keep: string; readonly discard: boolean }
) {
  const found = yield* workingChanges(workspace, state)
  const { branch, changes } = found
  const unpushed = branch.unpushed.length
  if (options.discard || (changes.length === 0 && unpushed === 0)) return found
  const shown = changes.slice(0, 10).map((c) => `  ${changeLine(c)}`)
  if (changes.length > shown.length) shown.push(`  ... and ${changes.length - shown.length} more`)
  const lost = [
    ...(changes.length === 0 ? [] : [`${changes.length} changed file(s)`]),
    ...(unpushed === 0 ? [] : [`${unpushed} unpushed commit(s)`])
  ].join(" and ")
  return yield* failure(
    `${options.command} would lose the local work on ${branch.name}: ${lost}${shown.length === 0 ? "" : `:\n${shown.join("\n")}`}\n` +
      `To keep it: ${options.keep}. To drop it: ${options.command} --discard.`,
    "local_work",
    { branch: branch.name, changed_paths: changes.map((c) => c.path), unpushed }
  )
})

/**
 * Moves main's unpushed commits to a new branch `name` (as `git switch -c` keeps HEAD): each is
 * re-made with the new branch name (a commit's hash covers it; the server checks it), parents
 * mapped, trees and kept blobs shared. main goes back to the server's head; the working tree,
 * with its uncommitted changes, stays as it is.
 */
export const carryMainWork = Effect.fn("LocalWork.carryMainWork")(function*(workspace: Workspace, state: RepoState, name: string) {
  const main = currentBranch(state)
  const renamed = new Map<string, string>()
  const mapped = (hash: string | null | undefined) => hash == null ? hash ?? null : renamed.get(hash) ?? hash
  for (const hash of main.unpushed) {
    const stored = yield* workspace.objects.readCommit(hash)
    if (stored === undefined) return yield* failure(`local commit ${hash} is missing from .grove/objects`, "missing_object")
    const c = stored.commit
    const timestamp = Objects.Timestamp.parseTimestamp(c.timestamp)
    if (timestamp === undefined) return yield* failure(`local commit ${hash} has a bad timestamp`, "bad_object")
    const parent = mapped(c.parent_hash)
    const mergeParent = mapped(c.merge_parent_hash)
    const moved = Objects.Commit.hashCommit({
      branch_name: name,
      parent_hash: parent,
      merge_parent_hash: mergeParent,
      manifest_hash: c.manifest_hash,
      author: c.author,
      message: c.message ?? null,
      timestamp
    })
    yield* workspace.objects.writeCommit({
      ...stored,
      commit: {
        ...c,
        hash: moved,
        branch_name: name,
        parent_hash: parent,
        ...(mergeParent === null ? {} : { merge_parent_hash: mergeParent })
      }
    })
    renamed.set(hash, moved)
  }
  const head = mapped(main.head)
  const target = newBranch(name, { head, unpushed: main.unpushed.map((h) => renamed.get(h)!) })
  const next: RepoState = {
    ...withBranch(withBranch(state, { ...main, head: main.remote_head, unpushed: [] }), target),
    branch: name
  }
  // The index keeps its entries (file hashes by stat); only its base no longer names the head.
  return { state: next, target }
})
