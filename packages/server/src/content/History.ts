/**
 * Reading history: a branch's commits after a point (pull), first-parent
 * chains (shallow pulls, `since` checks), and everything a set of root trees
 * reaches (the trees and blobs a pull or `commits/info` sends).
 */
import type { ApiSync } from "@grove/api"
import type * as Tree from "@grove/core/objects/Tree"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import type { Fragment } from "effect/sql/Statement"
import { type BlobInfo, ContentObjects, type CommitRow, toTreeData } from "./ContentObjects.ts"
import { makeTreeCache } from "./TreeCache.ts"

/** Repositories whose commit edges a node keeps, and the fetches of new commits before it reloads one whole. */
const ANCESTRY_REPOSITORIES = 64
const MAX_ANCESTRY_ROUNDS = 16

/** Longest first-parent walk when checking whether `since` is on a branch. */
const MAX_CHAIN = 100_000

const commitColumns = (sql: SqlClient.SqlClient) =>
  sql`hash, branch_name, parent_hash, merge_parent_hash, manifest_hash, author, message, timestamp, files, published`

const parseFiles = (row: CommitRow): CommitRow => typeof row.files === "string" ? { ...row, files: JSON.parse(row.files) } : row

/** Parents before children; ties by timestamp string then hash, so the order is stable. */
export const topologicalOrder = (commits: ReadonlyArray<CommitRow>): Array<CommitRow> => {
  const byHash = new Map(commits.map((c) => [c.hash, c]))
  const children = new Map<string, Array<string>>()
  const pending = new Map<string, number>()
  for (const c of commits) {
    const parents = [c.parent_hash, c.merge_parent_hash].filter((p): p is string => p !== null && byHash.has(p))
    pending.set(c.hash, new Set(parents).size)
    for (const p of new Set(parents)) children.set(p, [...(children.get(p) ?? []), c.hash])
  }
  const order = (a: CommitRow, b: CommitRow) => a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : a.hash < b.hash ? -1 : 1
  const ready = commits.filter((c) => pending.get(c.hash) === 0).sort(order)
  const out: Array<CommitRow> = []
  while (ready.length > 0) {
    const next = ready.shift()!
    out.push(next)
    for (const child of children.get(next.hash) ?? []) {
      const left = pending.get(child)! - 1
      pending.set(child, left)
      if (left === 0) {
        ready.push(byHash.get(child)!)
        ready.sort(order)
      }
    }
  }
  return out
}

export interface Reachable {
  readonly trees: ReadonlyArray<ApiSync.TreeData>
  readonly blobs: ReadonlyArray<BlobInfo>
}

export class History extends Context.Service<History, {
  /** Published commits of `branch` reachable from `head` through commits of that branch, parents first. */
  readonly branchCommits: (repoId: string, branch: string, head: string) => Effect.Effect<Array<CommitRow>, SqlError>
  /** The newest `limit` commits of the first-parent chain from `head`, newest first. */
  readonly firstParentChain: (repoId: string, head: string, limit: number) => Effect.Effect<Array<CommitRow>, SqlError>
  /**
   * Parent and merge-parent edges of published commits, every ancestor of `heads` included (for merge bases).
   * Kept per repository on this node: a published commit's parents never change, so later calls fetch only
   * the commits published since (usually a new head or two), not the whole history again.
   */
  /**
   * The published commits' edges (hash -> parents), closed under parents, reaching at least `heads`. `known`: commit
   * rows the caller read already (a merge's planning reads both heads'), not read again if published.
   */
  readonly ancestry: (
    repoId: string,
    heads: ReadonlyArray<string>,
    known?: ReadonlyArray<{ readonly hash: string; readonly parent_hash: string | null; readonly merge_parent_hash: string | null; readonly published: boolean }>
  ) => Effect.Effect<ReadonlyMap<string, ReadonlyArray<string>>, SqlError>
  readonly isOnFirstParentChain: (repoId: string, head: string, commit: string) => Effect.Effect<boolean, SqlError>
  readonly publishedCommits: (repoId: string, hashes: ReadonlyArray<string>) => Effect.Effect<Map<string, CommitRow>, SqlError>
  /** Every tree and blob (with its chunk list) the root trees reach. */
  readonly reachable: (orgId: string, roots: ReadonlyArray<string>, withBlobs: boolean) => Effect.Effect<Reachable, SqlError>
}>()("grove/server/content/History") {
  static readonly layer = Layer.effect(History, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const objects = yield* ContentObjects

    /** Per repository (most recently used last), its published commits' edges, closed under parents. */
    const ancestries = new Map<string, Map<string, ReadonlyArray<string>>>()
    const parentsOf = (row: { readonly parent_hash: string | null; readonly merge_parent_hash: string | null }) =>
      [row.parent_hash, row.merge_parent_hash].filter((p): p is string => p !== null)
    const edgeRows = (repoId: string) => (where: Fragment) =>
      sql<{ hash: string; parent_hash: string | null; merge_parent_hash: string | null }>`SELECT hash, parent_hash, merge_parent_hash
        FROM commits WHERE repo_id = ${repoId} AND published ${where}`

    const chain = (repoId: string, head: string, limit: number) =>
      sql<CommitRow & { n: number }>`WITH RECURSIVE chain AS (
          SELECT hash, parent_hash AS up, 1 AS n FROM commits WHERE repo_id = ${repoId} AND hash = ${head} AND published
          UNION ALL
          SELECT c.hash, c.parent_hash, chain.n + 1 FROM commits c JOIN chain ON c.hash = chain.up
          WHERE c.repo_id = ${repoId} AND c.published AND chain.n < ${limit}
        )
        SELECT ${commitColumns(sql)}, chain.n FROM chain JOIN commits USING (hash)
        WHERE commits.repo_id = ${repoId} ORDER BY chain.n`.pipe(Effect.map((rows) => rows.map(parseFiles)))

    return History.of({
      branchCommits: (repoId, branch, head) =>
        sql<CommitRow>`WITH RECURSIVE anc AS (
            SELECT hash, parent_hash, merge_parent_hash FROM commits
            WHERE repo_id = ${repoId} AND hash = ${head} AND published AND branch_name = ${branch}
            UNION
            SELECT c.hash, c.parent_hash, c.merge_parent_hash FROM commits c
            JOIN anc ON c.hash = anc.parent_hash OR c.hash = anc.merge_parent_hash
            WHERE c.repo_id = ${repoId} AND c.published AND c.branch_name = ${branch}
          )
          SELECT ${commitColumns(sql)} FROM commits WHERE repo_id = ${repoId} AND hash IN (SELECT hash FROM anc)`.pipe(
          Effect.map((rows) => topologicalOrder(rows.map(parseFiles)))
        ),
      firstParentChain: (repoId, head, limit) => chain(repoId, head, limit),
      ancestry: Effect.fnUntraced(function*(repoId, heads, known = []) {
        const rowsOf = edgeRows(repoId)
        // As the table read would find them: published rows only.
        const given = new Map(known.filter((row) => row.published).map((row) => [row.hash, row]))
        let edges = ancestries.get(repoId)
        ancestries.delete(repoId)
        if (edges !== undefined) {
          // Closed under parents: what is missing is what was published since, reached from the heads down to known commits.
          let missing = [...new Set(heads)].filter((h) => !edges!.has(h))
          const found = new Map<string, ReadonlyArray<string>>()
          for (let round = 0; missing.length > 0 && edges !== undefined; round++) {
            if (round === MAX_ANCESTRY_ROUNDS) edges = undefined
            else {
              const unread = missing.filter((h) => !given.has(h))
              const rows = [
                ...missing.flatMap((h) => given.get(h) ?? []),
                ...(unread.length === 0 ? [] : yield* rowsOf(sql`AND hash = ANY(${unread}::text[])`))
              ]
              missing = []
              for (const row of rows) {
                const parents = parentsOf(row)
                found.set(row.hash, parents)
                for (const p of parents) if (!edges.has(p) && !found.has(p)) missing.push(p)
              }
            }
          }
          for (const [hash, parents] of found) edges?.set(hash, parents)
        }
        edges ??= new Map((yield* rowsOf(sql.literal(""))).map((row) => [row.hash, parentsOf(row)]))
        ancestries.set(repoId, edges)
        for (const stale of [...ancestries.keys()].slice(0, Math.max(0, ancestries.size - ANCESTRY_REPOSITORIES))) ancestries.delete(stale)
        return edges as ReadonlyMap<string, ReadonlyArray<string>>
      }),
      isOnFirstParentChain: (repoId, head, commit) =>
        sql<{ hash: string }>`WITH RECURSIVE chain AS (
            SELECT hash, parent_hash, 1 AS n FROM commits WHERE repo_id = ${repoId} AND hash = ${head}
            UNION ALL
            SELECT c.hash, c.parent_hash, chain.n + 1 FROM commits c JOIN chain ON c.hash = chain.parent_hash
            WHERE c.repo_id = ${repoId} AND chain.n < ${MAX_CHAIN} AND chain.hash <> ${commit}
          )
          SELECT hash FROM chain WHERE hash = ${commit} LIMIT 1`.pipe(Effect.map((rows) => rows.length > 0)),
      publishedCommits: Effect.fnUntraced(function*(repoId, hashes) {
        const rows = yield* objects.loadCommits(repoId, hashes)
        return new Map([...rows].filter(([, c]) => c.published))
      }),
      reachable: Effect.fnUntraced(function*(orgId, roots, withBlobs) {
        const cache = makeTreeCache(objects, orgId)
        const trees: Array<ApiSync.TreeData> = []
        const blobHashes = new Set<string>()
        const seen = new Set<string>()
        let frontier = [...new Set(roots)]
        while (frontier.length > 0) {
          const todo = frontier.filter((h) => !seen.has(h))
          for (const h of todo) seen.add(h)
          yield* cache.load(todo)
          const next: Array<string> = []
          for (const h of todo) {
            const entries: ReadonlyArray<Tree.TreeEntry> | undefined = cache.get(h)
            if (entries === undefined) continue // published trees are stored; a missing one is skipped, not invented
            trees.push(toTreeData(h, entries))
            for (const e of entries) {
              if (e.kind === "tree") {
                if (!seen.has(e.hash)) next.push(e.hash)
              } else blobHashes.add(e.hash)
            }
          }
          frontier = next
        }
        if (!withBlobs) return { trees, blobs: [] }
        const info = yield* objects.blobInfo(orgId, [...blobHashes])
        return { trees, blobs: [...info.values()] }
      })
    })
  }))
}
