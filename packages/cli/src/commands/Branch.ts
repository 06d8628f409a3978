/**
 * `grove switch`, `grove desc` and `grove close`: which branch the checkout
 * works on, and the branch record (description, open -> closed) on the server.
 */
import { Names } from "@grove/core"
import { Effect, Option } from "effect"
import { failure, usage } from "../Failures.ts"
import { commitSnapshot, commitWorkingTree } from "../local/Commit.ts"
import type { BranchState, RepoState } from "../local/State.ts"
import { currentBranch, newBranch, withBranch } from "../local/State.ts"
import { carryMainWork, guardLocalWork, workingChanges } from "../local/LocalWork.ts"
import type { IndexEntry, Snapshot } from "../local/WorkingTree.ts"
import { readIndex } from "../local/WorkingTree.ts"
import type { Workspace } from "../local/Workspace.ts"
import { openWorkspace, repositoryOf, saveState } from "../local/Workspace.ts"
import { Output } from "../Output.ts"
import { fetchBranch, materialize } from "../sync/Fetch.ts"
import type { PullAnswer } from "../sync/Fetch.ts"
import { personalBranchName, remoteOf } from "../sync/Session.ts"
import { pushMetadata } from "./Push.ts"

/**
 * The server's rules, so a branch made here can be pushed and named in a path: a new branch follows
 * `POST /branches`' rule (no surrounding whitespace, not HEAD, not refs/...), an existing one the
 * rule for every branch name. Bad input is a usage error (2) before anything is touched.
 */
export const checkName = (name: string, create = false) => {
  const check = create ? Names.checkNewBranchName(name) : Names.checkBranchName(name)
  return check.ok ? Effect.void : Effect.fail(usage(`invalid branch name ${JSON.stringify(name)}: ${check.reason}`))
}

export interface SwitchOptions {
  readonly name: Option.Option<string>
  readonly create: boolean
  /** Drop main's uncommitted changes and unpushed commits instead of refusing. */
  readonly discard?: boolean | undefined
}

/**
 * Moves the checkout to another branch (an existing one, or a new one from main's newest head) and
 * saves the state; used by `grove switch` and by `grove merge` after the branch has landed. Work on
 * a branch is checkpointed there first. main changes only by merge, so its work cannot stay there:
 * a new branch (-c) takes it along, and any other switch refuses unless told to discard it.
 */
export const switchCheckout = Effect.fn("Branch.switchCheckout")(function*(workspace: Workspace, start: RepoState, options: SwitchOptions) {
  if (start.merge !== undefined) return yield* failure("a merge is in progress: finish it with grove commit first", "merge_in_progress")
  const wanted = Option.getOrUndefined(options.name)
  if (wanted !== undefined) yield* checkName(wanted, options.create)
  const creating = options.create || wanted === undefined
  const name = creating ? wanted ?? personalBranchName(start.user) : wanted!
  if (creating && start.branches[name] !== undefined) return yield* failure(`branch ${name} exists already: grove switch ${name}`, "branch_exists")
  const leaving = currentBranch(start)
  let state = start
  // What the working tree holds when the target's files are written over it.
  let tree: { readonly snapshot: Snapshot; readonly files: ReadonlyMap<string, IndexEntry> } | undefined
  if (leaving.name !== "main") {
    // Nothing is lost by switching: the working tree is checkpointed on the branch being left.
    state = (yield* commitWorkingTree(workspace, start)).state
  } else if (creating) {
    const work = yield* workingChanges(workspace, start)
    if (work.changes.length > 0 || leaving.unpushed.length > 0) {
      // As `git switch -c`: the new branch starts where main's local work is, and the files stay.
      const carried = yield* carryMainWork(workspace, start, name)
      yield* saveState(workspace, carried.state)
      return { state: carried.state, from: leaving, target: carried.target, applied: { written: 0, removed: 0, downloadedBlobs: 0, withheld: 0 } }
    }
  } else if (name !== "main") {
    const work = yield* guardLocalWork(workspace, start, {
      command: `grove switch ${name}`,
      keep: "grove switch -c NAME takes it along to a new branch (main changes only by merge)",
      discard: options.discard === true
    })
    tree = { snapshot: work.scanned.snapshot, files: work.scanned.files }
    state = withBranch(start, { ...leaving, head: leaving.remote_head, unpushed: [] })
  }
  const from = currentBranch(state)
  const remote = repositoryOf(workspace) === undefined ? undefined : yield* remoteOf(workspace)
  let target: BranchState
  let blobs: PullAnswer["blobs"] = []
  if (!creating && state.branches[name] !== undefined) {
    target = state.branches[name]!
  } else if (creating) {
    // A new branch starts from main's newest head the checkout can learn.
    const known = state.branches["main"]
    let mainHead = known?.remote_head ?? null
    if (remote !== undefined) {
      const main = yield* fetchBranch(workspace, remote, "main", null).pipe(Effect.catchIf((e) => e.details?.["status"] === 404, () => Effect.succeed(undefined)))
      if (main !== undefined) {
        mainHead = main.head
        blobs = main.blobs
        // main's own local work (none once this command guards it) is never dropped here.
        if ((known?.unpushed.length ?? 0) === 0) {
          state = withBranch(state, { ...(known ?? newBranch("main", { parent_branch: null })), remote_head: main.head, head: main.head, unpushed: [] })
        }
      }
    }
    target = newBranch(name, { head: mainHead })
  } else {
    if (remote === undefined) return yield* failure(`no branch ${name} in this checkout`, "no_such_branch")
    const answer = yield* fetchBranch(workspace, remote, name, null)
    if (answer.branch === null) return yield* failure(`no branch ${name} here or on the server (create it with grove switch -c ${name})`, "no_such_branch")
    blobs = answer.blobs
    target = newBranch(name, {
      parent_branch: answer.branch.parent_branch ?? null,
      description: answer.branch.description ?? null,
      status: answer.branch.status === "closed" || answer.branch.status === "merged" ? answer.branch.status : "open",
      created_at: answer.branch.created_at,
      remote_head: answer.head,
      head: answer.head
    })
  }
  const applied = yield* materialize(
    workspace,
    remote,
    tree?.snapshot ?? (yield* commitSnapshot(workspace, from.head)),
    yield* commitSnapshot(workspace, target.head),
    tree?.files ?? (yield* readIndex(workspace.root)).files,
    blobs
  )
  state = { ...withBranch(state, target), branch: target.name }
  yield* saveState(workspace, state)
  return { state, from, target, applied }
})

export const switchBranch = Effect.fn("Branch.switch")(function*(options: SwitchOptions) {
  const out = yield* Output
  if (Option.isSome(options.name)) yield* checkName(options.name.value, options.create)
  const opened = yield* openWorkspace()
  const { applied, from, target } = yield* switchCheckout(opened.workspace, opened.state, options)
  yield* out.result(
    { branch: target.name, previous: from.name, head: target.head, parent_branch: target.parent_branch, written: applied.written, removed: applied.removed },
    () => `Switched to ${target.name}${target.parent_branch === null ? "" : ` (from ${target.parent_branch})`}.`
  )
})

export const describe = Effect.fn("Branch.desc")(function*(options: { readonly text: string }) {
  const out = yield* Output
  const { state, workspace } = yield* openWorkspace()
  const branch = currentBranch(state)
  let updated: BranchState = { ...branch, description: options.text, description_pending: true }
  // A branch the server knows gets the description now; otherwise the first push carries it.
  let sent = false
  if (branch.remote_head !== null && repositoryOf(workspace) !== undefined) {
    yield* pushMetadata(yield* remoteOf(workspace), updated)
    updated = { ...updated, description_pending: false }
    sent = true
  }
  yield* saveState(workspace, withBranch(state, updated))
  yield* out.result(
    { branch: branch.name, description: options.text, sent },
    () => sent ? `Description of ${branch.name} updated.` : `Description of ${branch.name} set; grove push sends it.`
  )
})

export const close = Effect.fn("Branch.close")(function*() {
  const out = yield* Output
  const { state, workspace } = yield* openWorkspace()
  const branch = currentBranch(state)
  if (branch.name === "main") return yield* failure("main cannot be closed", "main_refused")
  let closeSent = false
  if (branch.remote_head !== null && repositoryOf(workspace) !== undefined) {
    const remote = yield* remoteOf(workspace)
    yield* remote.connection.call(remote.connection.client.branches.close({
      params: { owner: remote.owner, name: remote.name, branch: branch.name }
    }))
    closeSent = true
  }
  yield* saveState(workspace, withBranch(state, { ...branch, status: "closed", close_pending: !closeSent }))
  yield* out.result(
    { branch: branch.name, status: "closed", sent: closeSent },
    () => `Closed ${branch.name}${closeSent ? "" : " (locally; it was never pushed)"}. Start new work with grove switch -c.`
  )
})
