/**
 * What `grove status` prints, from the checkout's records and the working tree's changes. Node and
 * type imports only: `grove status` in an unchanged tree is answered before Effect loads (NoopPush.ts).
 */
import type { Objects } from "@grove/core"
import type { BranchState, PendingMerge } from "./State.ts"

type FileChange = Objects.FileChanges.FileChange

const CHANGE_LETTER: Record<string, string> = { added: "A", modified: "M", deleted: "D", renamed: "R" }

/** One change as status prints it: `M README.md`. */
export const changeLine = (c: FileChange): string =>
  `${CHANGE_LETTER[c.change_type]} ${c.old_path == null ? c.path : `${c.old_path} -> ${c.path}`}`

export interface StatusInput {
  readonly repository: { readonly owner: string; readonly name: string } | undefined
  readonly remote: string
  readonly branch: BranchState
  /** The merge in progress on this branch, if any. */
  readonly merge: PendingMerge | undefined
  readonly changes: ReadonlyArray<FileChange>
  readonly invalid: ReadonlyArray<{ readonly path: string; readonly reason: string }>
}

/** The status as JSON (`value`) and as text (`human`). */
export const statusReport = ({ branch, changes, invalid, merge, remote, repository }: StatusInput) => {
  const value = {
    repository: repository === undefined ? null : `${repository.owner}/${repository.name}`,
    remote,
    branch: branch.name,
    parent_branch: branch.parent_branch,
    description: branch.description,
    status: branch.status,
    head: branch.head,
    remote_head: branch.remote_head,
    unpushed: branch.unpushed.length,
    merge: merge === undefined ? null : { merge_parent: merge.merge_parent, conflicts: merge.conflicts },
    changes: changes.map((c) => ({ path: c.path, change_type: c.change_type, ...(c.old_path == null ? {} : { old_path: c.old_path }) })),
    invalid_paths: invalid
  }
  const human = () =>
    [
      `On branch ${branch.name}${branch.parent_branch === null ? "" : ` (from ${branch.parent_branch})`}${branch.status === "open" ? "" : ` [${branch.status}]`}`,
      `Repository: ${value.repository ?? "(not pushed yet)"} on ${remote}`,
      ...(branch.description === null ? [] : [`Description: ${branch.description}`]),
      `Head: ${branch.head?.slice(0, 12) ?? "(none)"}${
        branch.unpushed.length > 0 ? `, ${branch.unpushed.length} commit(s) not pushed` : branch.remote_head === null ? ", never pushed" : ", pushed"
      }`,
      ...(merge === undefined ? [] : [`Merging ${merge.merge_parent.slice(0, 12)}; conflicts in: ${merge.conflicts.join(", ") || "(none)"}`]),
      changes.length === 0
        ? "Nothing changed since the last commit."
        : `Changes since the last commit:\n${changes.map((c) => `  ${changeLine(c)}`).join("\n")}`,
      ...invalid.map((i) => `  ! ${i.path}: ${i.reason} (cannot be committed)`)
    ].join("\n")
  return { value, human }
}
