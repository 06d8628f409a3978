/**
 * Branches waiting for a reader: open branches with commits, in the given repositories, that someone
 * else made and that changed since the reader's last read receipt (or were never read by them). For
 * the signed-in home page.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export interface WaitingBranch {
  readonly owner: string
  readonly repo: string
  readonly name: string
  readonly description: string | null
  readonly createdBy: string
  readonly updatedAt: Date
}

export const waitingBranches = Effect.fnUntraced(function*(repoIds: ReadonlyArray<string>, reader: string, limit: number) {
  if (repoIds.length === 0) return [] as ReadonlyArray<WaitingBranch>
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<WaitingBranch>`SELECT o.slug AS owner, r.name AS repo, b.name, b.description, b.created_by AS "createdBy", b.updated_at AS "updatedAt"
    FROM branches b JOIN repositories r ON r.id = b.repo_id JOIN organizations o ON o.id = r.org_id
    LEFT JOIN branch_reads br ON br.repo_id = b.repo_id AND br.branch = b.name AND br.reader = ${reader}
    WHERE b.repo_id = ANY(${repoIds}::uuid[]) AND b.status = 'open' AND b.name <> 'main' AND b.head IS NOT NULL
      AND b.created_by <> ${reader} AND (br.read_at IS NULL OR br.read_at < b.updated_at)
    ORDER BY b.updated_at DESC LIMIT ${limit}`
  return rows
})
