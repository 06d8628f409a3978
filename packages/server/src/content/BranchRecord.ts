/** A branch as stored, and its API forms; shared by reads and the Branch entity. */
import type { ApiSync } from "@grove/api"
import type { SqlClient } from "effect/sql"

export interface BranchRecord {
  readonly repoId: string
  readonly name: string
  readonly description: string | null
  readonly parentBranch: string | null
  readonly status: "open" | "closed" | "merged"
  readonly closeReason: string | null
  readonly head: string | null
  readonly createdBy: string
  readonly createdAt: string
  readonly updatedAt: Date
  readonly pushedAt: Date | null
  readonly version: number
}

export const branchColumns = (sql: SqlClient.SqlClient) =>
  sql`repo_id AS "repoId", name, description, parent_branch AS "parentBranch", status, close_reason AS "closeReason",
    head, created_by AS "createdBy", created_at AS "createdAt", updated_at AS "updatedAt", pushed_at AS "pushedAt", version`

const iso = (d: Date | string) => (d instanceof Date ? d : new Date(d)).toISOString()

/** A merged branch reads `status: closed` (the Oak client knows open and closed only; it would take merged for open) and `state: merged`. */
export const toApiBranch = (b: BranchRecord): ApiSync.Branch => ({
  name: b.name,
  description: b.description,
  parent_branch: b.parentBranch,
  status: b.status === "merged" ? "closed" : b.status,
  state: b.status,
  head: b.head,
  created_by: b.createdBy,
  created_at: b.createdAt,
  updated_at: iso(b.updatedAt),
  ...(b.closeReason === null ? {} : { close_reason: b.closeReason })
})

/** The Oak client's branch row: merged branches read as closed (it knows open and closed only). */
export const toBranchData = (b: BranchRecord): ApiSync.BranchData => ({
  name: b.name,
  description: b.description,
  parent_branch: b.parentBranch,
  status: b.status === "open" ? "open" : "closed",
  created_at: b.createdAt,
  ...(b.closeReason === null ? {} : { close_reason: b.closeReason })
})
