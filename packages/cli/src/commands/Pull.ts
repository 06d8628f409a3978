/**
 * `grove pull`: checkpoints the working tree, fetches the branch (fast-forward,
 * or a three-way merge when local and server commits diverged), then merges
 * the parent branch in. Conflicts are written with markers and listed; the
 * command then exits with code 5 and the next `grove commit` records the merge.
 */
import { Merge } from "@grove/core"
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { CliFailure, ExitCode, failure } from "../Failures.ts"
import { commitSnapshot, commitWorkingTree } from "../local/Commit.ts"
import { io } from "../local/Io.ts"
import { blobPath, tempDir } from "../local/Objects.ts"
import { blobsForTextMerge, loadParents, planMerge } from "../local/Merging.ts"
import type { RepoState } from "../local/State.ts"
import { currentBranch, newBranch, withBranch } from "../local/State.ts"
import { withheldLine } from "../local/Withheld.ts"
import { readIndex } from "../local/WorkingTree.ts"
import type { Workspace } from "../local/Workspace.ts"
import { openWorkspace, saveState } from "../local/Workspace.ts"
import { Output } from "../Output.ts"
import { fetchBlobBytes } from "../sync/Download.ts"
import { fetchBranch, materialize } from "../sync/Fetch.ts"
import type { PullAnswer } from "../sync/Fetch.ts"
import type { RemoteRepo } from "../sync/RemoteRepo.ts"
import { remoteOf } from "../sync/Session.ts"

/** Exit code of a pull that left conflicts (README: 5). */
export const CONFLICT_EXIT = ExitCode.conflict

/** A branch's new commits; a `since` the server no longer has (409) means: take the branch whole. */
const fetchSince = (workspace: Workspace, remote: RemoteRepo, branch: string, since: string | null) =>
  fetchBranch(workspace, remote, branch, since).pipe(
    Effect.catchIf(
      (error) => since !== null && error.details?.["status"] === 409,
      () => fetchBranch(workspace, remote, branch, null)
    )
  )

interface Integration {
  readonly state: RepoState
  readonly conflicts: ReadonlyArray<{ readonly path: string; readonly kind: string }>
  readonly commit: string | undefined
  /** Files of the merged tree withheld from this caller (left out). */
  readonly withheld: number
}

/**
 * Merges `theirs` into the working tree (which holds `ours`). The merge commit gets `parent` and
 * `mergeParent`; with conflicts it is left for the user's `grove commit`.
 */
const integrate = Effect.fn("Pull.integrate")(function*(
  workspace: Workspace,
  remote: RemoteRepo,
  state: RepoState,
  options: { ours: string | null; theirs: string; parent: string; mergeParent: string; label: string }
) {
  const parents = yield* loadParents(workspace.root)
  const base = options.ours === null ? null : Merge.MergeBase.mergeBase(options.ours, options.theirs, parents)
  const baseSnap = yield* commitSnapshot(workspace, base)
  const oursSnap = yield* commitSnapshot(workspace, options.ours)
  const theirsSnap = yield* commitSnapshot(workspace, options.theirs)
  const preview = Merge.ThreeWay.mergeSnapshots(baseSnap, oursSnap, theirsSnap)
  const needed = blobsForTextMerge(preview.conflicts, baseSnap, oursSnap, theirsSnap)
  // Our side is the working tree; the rest comes from the kept blobs or the server.
  const bytes = new Map<string, Uint8Array>()
  const fromServer: Array<string> = []
  const oursByHash = new Map([...oursSnap].map(([file, f]) => [f.hash, file]))
  for (const hash of needed) {
    const kept = (yield* workspace.objects.hasBlob(hash)) ? blobPath(workspace.root, hash) : undefined
    const inTree = oursByHash.get(hash)
    const file = kept ?? (inTree === undefined ? undefined : path.join(workspace.root, inTree))
    if (file === undefined) fromServer.push(hash)
    else bytes.set(hash, yield* io(`cannot read ${file}`, () => fs.readFile(file)))
  }
  if (fromServer.length > 0) {
    const fetched = yield* fetchBlobBytes(remote, fromServer.map((hash) => ({ hash, size: 1 })), path.join(tempDir(workspace.root), `merge-${process.pid}`))
    for (const [hash, data] of fetched) bytes.set(hash, data)
  }
  const plan = planMerge(baseSnap, oursSnap, theirsSnap, (h) => bytes.get(h), { ours: "ours (local)", theirs: `theirs (${options.label})` })
  const index = yield* readIndex(workspace.root)
  const applied = yield* materialize(workspace, remote, oursSnap, plan.target, index.files, [])
  for (const [file, text] of plan.writes) yield* io(`cannot write ${file}`, () => fs.writeFile(path.join(workspace.root, file), text))
  const branch = currentBranch(state)
  let next: RepoState = {
    ...state,
    merge: { branch: branch.name, parent: options.parent, merge_parent: options.mergeParent, conflicts: plan.conflicts.map((c) => c.path) }
  }
  yield* saveState(workspace, next)
  if (plan.conflicts.length > 0) return { state: next, conflicts: plan.conflicts, commit: undefined, withheld: applied.withheld } satisfies Integration
  const committed = yield* commitWorkingTree(workspace, next)
  next = committed.state
  return { state: next, conflicts: [], commit: committed.commit?.hash, withheld: applied.withheld } satisfies Integration
})

export interface PullOutcome {
  readonly state: RepoState
  readonly events: ReadonlyArray<string>
}

/**
 * Fetches the current branch and merges its parent in, saving the state. Conflicts are written with
 * markers and fail with exit code 5 (`code: "conflicts"`); used by `grove pull` and `grove revert`.
 */
export const pullCheckout = Effect.fn("Pull.checkout")(function*(opened: { readonly workspace: Workspace; readonly state: RepoState }) {
  const out = yield* Output
  const workspace = opened.workspace
  if (opened.state.merge !== undefined && opened.state.merge.conflicts.length > 0) {
    return yield* failure(
      `a merge is in progress: resolve the conflicts in ${opened.state.merge.conflicts.join(", ")} and run grove commit`,
      "merge_in_progress",
      { conflict_paths: opened.state.merge.conflicts }
    )
  }
  let state = (yield* commitWorkingTree(workspace, opened.state)).state
  const remote = yield* remoteOf(workspace)
  const events: Array<string> = []
  let conflicts: ReadonlyArray<{ readonly path: string; readonly kind: string }> = []

  // 1. The branch itself.
  let branch = currentBranch(state)
  const own: PullAnswer = yield* fetchSince(workspace, remote, branch.name, branch.remote_head)
  const serverHead = own.head
  // A push stopped after the server took it: the server's head is one of our unpushed commits. It and
  // those before it are published (not a divergence to merge); the ones after it are still ours to push.
  const landed = serverHead === null ? -1 : branch.unpushed.indexOf(serverHead)
  if (landed >= 0) {
    branch = { ...branch, remote_head: serverHead, unpushed: branch.unpushed.slice(landed + 1) }
    state = withBranch(state, branch)
    events.push(`recorded the push of ${serverHead!.slice(0, 12)} that was interrupted`)
  }
  if (serverHead !== null && serverHead !== branch.remote_head && serverHead !== branch.head) {
    const parents = yield* loadParents(workspace.root)
    if (branch.head === null || Merge.MergeBase.isAncestor(branch.head, serverHead, parents)) {
      // Fast-forward: nothing local that the server lacks.
      const index = yield* readIndex(workspace.root)
      const applied = yield* materialize(workspace, remote, yield* commitSnapshot(workspace, branch.head), yield* commitSnapshot(workspace, serverHead), index.files, own.blobs)
      state = withBranch(state, { ...branch, head: serverHead, remote_head: serverHead, unpushed: [] })
      yield* saveState(workspace, state)
      events.push(`fast-forwarded ${branch.name} to ${serverHead.slice(0, 12)}`)
      if (applied.withheld > 0) events.push(withheldLine(applied.withheld))
    } else {
      // Diverged: our unpushed commits merge onto the server's head.
      state = withBranch(state, { ...branch, remote_head: serverHead })
      const merged = yield* integrate(workspace, remote, state, {
        ours: branch.head,
        theirs: serverHead,
        parent: serverHead,
        mergeParent: branch.head,
        label: branch.name
      })
      state = merged.state
      conflicts = merged.conflicts
      events.push(`merged ${branch.name} from the server${conflicts.length > 0 ? " with conflicts" : ""}`)
      if (merged.withheld > 0) events.push(withheldLine(merged.withheld))
    }
  }
  const afterOwn = currentBranch(state)
  if (own.branch !== null) {
    state = withBranch(state, {
      ...afterOwn,
      status: own.branch.status === "closed" || own.branch.status === "merged" ? own.branch.status : "open",
      description: afterOwn.description_pending === true ? afterOwn.description : own.branch.description ?? null
    })
  }

  // 2. The parent branch, merged in.
  const parentName = currentBranch(state).parent_branch
  if (conflicts.length === 0 && parentName !== null && parentName !== currentBranch(state).name) {
    const known = state.branches[parentName]
    const parentAnswer = yield* fetchSince(workspace, remote, parentName, known?.remote_head ?? null)
    const parentHead = parentAnswer.head
    if (parentHead !== null) {
      const tracked = known ?? newBranch(parentName, { parent_branch: null })
      // The parent's own unpushed commits (an older checkout's work on main) are kept, never dropped.
      state = withBranch(state, tracked.unpushed.length > 0 ? { ...tracked, remote_head: parentHead } : { ...tracked, remote_head: parentHead, head: parentHead, unpushed: [] })
      const current = currentBranch(state)
      const parents = yield* loadParents(workspace.root)
      if (current.head !== null && Merge.MergeBase.isAncestor(parentHead, current.head, parents)) {
        // Already contains the parent.
      } else if (
        current.unpushed.length === 0 && current.remote_head === null &&
        (current.head === null || Merge.MergeBase.isAncestor(current.head, parentHead, parents))
      ) {
        // A branch with no commits of its own simply starts from the parent's new head.
        const index = yield* readIndex(workspace.root)
        const applied = yield* materialize(workspace, remote, yield* commitSnapshot(workspace, current.head), yield* commitSnapshot(workspace, parentHead), index.files, parentAnswer.blobs)
        state = withBranch(state, { ...current, head: parentHead })
        events.push(`moved ${current.name} to ${parentName} at ${parentHead.slice(0, 12)}`)
        if (applied.withheld > 0) events.push(withheldLine(applied.withheld))
      } else {
        yield* saveState(workspace, state)
        const merged = yield* integrate(workspace, remote, state, {
          ours: current.head,
          theirs: parentHead,
          parent: current.head!,
          mergeParent: parentHead,
          label: parentName
        })
        state = merged.state
        conflicts = merged.conflicts
        events.push(`merged ${parentName} into ${current.name}${conflicts.length > 0 ? " with conflicts" : ""}`)
        if (merged.withheld > 0) events.push(withheldLine(merged.withheld))
      }
    }
  }
  yield* saveState(workspace, state)
  const current = currentBranch(state)
  if (conflicts.length > 0) {
    const list = conflicts.map((c) => `  ${c.path} (${c.kind})`).join("\n")
    yield* out.note(`Conflicts (fix them, then run grove commit and grove push):\n${list}`)
    return yield* new CliFailure({
      message: `merge conflicts in ${conflicts.length} file(s): ${conflicts.map((c) => c.path).join(", ")}`,
      exitCode: CONFLICT_EXIT,
      code: "conflicts",
      details: { conflict_paths: conflicts.map((c) => c.path), conflicts, branch: current.name }
    })
  }
  return { state, events } satisfies PullOutcome
})

export const pull = Effect.fn("Pull.run")(function*() {
  const out = yield* Output
  const { events, state } = yield* pullCheckout(yield* openWorkspace())
  const current = currentBranch(state)
  yield* out.result(
    { branch: current.name, head: current.head, remote_head: current.remote_head, unpushed: current.unpushed.length, events },
    () => events.length === 0 ? `Already up to date (${current.name}).` : events.map((e) => `${e[0]!.toUpperCase()}${e.slice(1)}.`).join("\n")
  )
})
