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
}

/**
 * Moves the checkout to another branch (an existing one, or a new one from main's newest head) and
 * saves the state; used by `grove switch` and by `grove merge` after the branch has landed.
 */
export const switchCheckout = Effect.fn("Branch.switchCheckout")(function*(workspace: Workspace, start: RepoState, options: SwitchOptions) {
  if (start.merge !== undefined) return yield* failure("a merge is in progress: finish it with grove commit first", "merge_in_progress")
  // Nothing is lost by switching: the working tree is checkpointed on the branch being left.
  let state = (yield* commitWorkingTree(workspace, start)).state
  const from = currentBranch(state)
  const wanted = Option.getOrUndefined(options.name)
  if (wanted !== undefined) yield* checkName(wanted, options.create)
  const remote = repositoryOf(workspace) === undefined ? undefined : yield* remoteOf(workspace)
  let target: BranchState
  let blobs: PullAnswer["blobs"] = []
  if (wanted !== undefined && state.branches[wanted] !== undefined && !options.create) {
    target = state.branches[wanted]!
  } else if (options.create || wanted === undefined) {
    const name = wanted ?? personalBranchName(state.user)
    if (state.branches[name] !== undefined) return yield* failure(`branch ${name} exists already: grove switch ${name}`, "branch_exists")
    // A new branch starts from main's newest head the checkout can learn.
    let mainHead = state.branches["main"]?.remote_head ?? null
    if (remote !== undefined) {
      const main = yield* fetchBranch(workspace, remote, "main", null).pipe(Effect.catchIf((e) => e.details?.["status"] === 404, () => Effect.succeed(undefined)))
      if (main !== undefined) {
        mainHead = main.head
        blobs = main.blobs
        state = withBranch(state, { ...(state.branches["main"] ?? newBranch("main", { parent_branch: null })), remote_head: main.head, head: main.head, unpushed: [] })
      }
    }
    target = newBranch(name, { head: mainHead })
  } else {
    if (remote === undefined) return yield* failure(`no branch ${wanted} in this checkout`, "no_such_branch")
    const answer = yield* fetchBranch(workspace, remote, wanted, null)
    if (answer.branch === null) return yield* failure(`no branch ${wanted} here or on the server (create it with grove switch -c ${wanted})`, "no_such_branch")
    blobs = answer.blobs
    target = newBranch(wanted, {
      parent_branch: answer.branch.parent_branch ?? null,
      description: answer.branch.description ?? null,
      status: answer.branch.status === "closed" || answer.branch.status === "merged" ? answer.branch.status : "open",
      created_at: answer.branch.created_at,
      remote_head: answer.head,
      head: answer.head
    })
  }
  const index = yield* readIndex(workspace.root)
  const applied = yield* materialize(
    workspace,
    remote,
    yield* commitSnapshot(workspace, from.head),
    yield* commitSnapshot(workspace, target.head),
    index.files,
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
