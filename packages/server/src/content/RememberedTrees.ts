/**
 * Parsed trees kept across requests (ContentObjects.loadTrees answers from here first), by organization
 * and hash. Safe to keep: a tree's row never changes (its hash is its body's) and is deleted only with
 * its organization (gc sweeps blobs and chunks, never trees), so a kept tree is one its organization
 * has. What a push stores is kept too: the next push of the branch diffs against those trees, which
 * were otherwise read back a directory level per query. Bounded by entries (the least recently used go
 * first): 20,000 entries are ~3 MiB of heap.
 */
import type * as Tree from "@grove/core/objects/Tree"

const MAX_ENTRIES = 20_000

export interface RememberedTrees {
  readonly get: (orgId: string, hash: string) => ReadonlyArray<Tree.TreeEntry> | undefined
  /** `entries` in canonical order (as `Tree.decodeTree` gives them). */
  readonly add: (orgId: string, hash: string, entries: ReadonlyArray<Tree.TreeEntry>) => void
}

export const makeRememberedTrees = (maxEntries = MAX_ENTRIES): RememberedTrees => {
  // A Map keeps insertion order: the first key is the least recently used one.
  const trees = new Map<string, ReadonlyArray<Tree.TreeEntry>>()
  let held = 0
  const weight = (entries: ReadonlyArray<Tree.TreeEntry>) => entries.length + 1
  return {
    get: (orgId, hash) => {
      const key = `${orgId}:${hash}`
      const entries = trees.get(key)
      if (entries !== undefined) {
        trees.delete(key)
        trees.set(key, entries)
      }
      return entries
    },
    add: (orgId, hash, entries) => {
      const key = `${orgId}:${hash}`
      if (trees.has(key) || weight(entries) > maxEntries) return
      trees.set(key, entries)
      held += weight(entries)
      for (const [oldest, old] of trees) {
        if (held <= maxEntries) break
        trees.delete(oldest)
        held -= weight(old)
      }
    }
  }
}
