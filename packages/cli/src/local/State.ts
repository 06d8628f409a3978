/**
 * `.grove/state.json`: the current branch and what the checkout knows of each
 * branch (its record, the server's head as last seen, the local head and the
 * local commits not pushed yet), plus a merge left unfinished by conflicts.
 * Read and written by Workspace.ts; no Effect here (the small push, SmallPush.ts, uses it before the client loads).
 */
import * as path from "node:path"

export type BranchStatus = "open" | "closed" | "merged"

export interface BranchState {
  readonly name: string
  readonly parent_branch: string | null
  readonly description: string | null
  readonly status: BranchStatus
  readonly created_at: string
  /** The branch head on the server when last pushed or pulled; null before the first push. */
  readonly remote_head: string | null
  /** The local head: remote_head plus `unpushed`, or the commit the branch starts from. */
  readonly head: string | null
  /** Local commits not on the server yet, parent before child. */
  readonly unpushed: ReadonlyArray<string>
  /** The description was changed locally and not sent yet. */
  readonly description_pending?: boolean | undefined
  /** Closing was asked for and not sent yet. */
  readonly close_pending?: boolean | undefined
}

/** A merge whose conflicts the user resolves: the next commit gets these two parents. */
export interface PendingMerge {
  readonly branch: string
  readonly parent: string
  readonly merge_parent: string
  readonly conflicts: ReadonlyArray<string>
}

export interface RepoState {
  readonly version: 1
  readonly branch: string
  /** Who commits here (the author of local commits). */
  readonly user: string
  readonly branches: Readonly<Record<string, BranchState>>
  readonly merge?: PendingMerge | undefined
}

export const statePath = (root: string): string => path.join(root, ".grove", "state.json")

export const newBranch = (
  name: string,
  fields: Partial<Omit<BranchState, "name">> = {}
): BranchState => ({
  name,
  parent_branch: "main",
  description: null,
  status: "open",
  created_at: new Date().toISOString(),
  remote_head: null,
  head: null,
  unpushed: [],
  ...fields
})

export const initialState = (user: string, branch: BranchState): RepoState => ({
  version: 1,
  user,
  branch: branch.name,
  branches: { [branch.name]: branch }
})

export const currentBranch = (state: RepoState): BranchState => state.branches[state.branch]!

export const withBranch = (state: RepoState, branch: BranchState): RepoState => ({
  ...state,
  branches: { ...state.branches, [branch.name]: branch }
})
