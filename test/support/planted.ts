/**
 * Commits an older server took that a push is refused now (a `.grove` in a tree), stored in a stopped embedded
 * server's database as a push would have left them: the trees, the repository's reach of them and the published
 * commit row. Blobs are not stored: a test plants commits whose blobs are stored already, or never read.
 */
import type { PGlite } from "@electric-sql/pglite"
import { ApiSync } from "@grove/api"
import * as Tree from "@grove/core/objects/Tree"
import type { Built } from "./content.ts"

/** Plants `built` in repository `name` (by name: one per test server); answers the repository's id. */
export const plantCommit = async (db: PGlite, name: string, built: Built): Promise<string> => {
  const [repo] = (await db.query<{ id: string; org_id: string }>(`SELECT id, org_id FROM repositories WHERE name = $1`, [name])).rows
  for (const t of built.trees) {
    await db.query(`INSERT INTO trees (org_id, hash, body) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, [repo!.org_id, t.hash, Tree.encodeTree(t.entries)])
    await db.query(`INSERT INTO repo_trees (repo_id, tree_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [repo!.id, t.hash])
  }
  const c = built.commit
  await db.query(
    `INSERT INTO commits (repo_id, hash, branch_name, parent_hash, manifest_hash, author, timestamp, files, published)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, true)`,
    [repo!.id, c.hash, c.branch_name, c.parent_hash, c.manifest_hash, c.author, c.timestamp, JSON.stringify(c.files.map(ApiSync.toFileChangeData))]
  )
  return repo!.id
}
