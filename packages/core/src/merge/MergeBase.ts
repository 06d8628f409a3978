/**
 * Common ancestors in the commit graph, over both parent and merge-parent edges. Pure over a
 * `parents` lookup (a commit's parent, then merge parent; `undefined` or `[]` for a commit whose
 * parents are unknown or absent, e.g. the edge of a shallow history).
 */
import type { Hash } from "../objects/Blake3.ts"

export type Parents = (hash: Hash) => ReadonlyArray<Hash> | undefined

/** Every commit reachable from `start` (itself included), with its BFS distance. */
const ancestors = (start: Hash, parents: Parents): Map<Hash, number> => {
  const distance = new Map<Hash, number>([[start, 0]])
  const queue: Array<Hash> = [start]
  for (let i = 0; i < queue.length; i++) {
    const h = queue[i] as Hash
    const d = distance.get(h) as number
    for (const p of parents(h) ?? []) {
      if (distance.has(p)) continue
      distance.set(p, d + 1)
      queue.push(p)
    }
  }
  return distance
}

/**
 * The best common ancestors of `a` and `b`: common ancestors that are not an ancestor of another
 * common ancestor. Nearest first (sum of BFS distances from `a` and `b`), ties by hash, so the
 * order is deterministic. Empty when the histories are unrelated.
 *
 * Walks both histories in full (linear in their size); fine for the sizes a push or merge sees.
 */
export const mergeBases = (a: Hash, b: Hash, parents: Parents): Array<Hash> => {
  if (a === b) return [a]
  const fromA = ancestors(a, parents)
  const fromB = ancestors(b, parents)
  const common: Array<Hash> = []
  for (const h of fromA.keys()) if (fromB.has(h)) common.push(h)
  // The common set is closed under ancestry, so "an ancestor of another common ancestor" is
  // exactly "a parent of some common ancestor".
  const dominated = new Set<Hash>()
  for (const h of common) for (const p of parents(h) ?? []) dominated.add(p)
  const score = (h: Hash): number => (fromA.get(h) as number) + (fromB.get(h) as number)
  return common
    .filter((h) => !dominated.has(h))
    .sort((x, y) => score(x) - score(y) || (x < y ? -1 : x > y ? 1 : 0))
}

/** The merge base of `a` and `b`: the first of `mergeBases`, or null when they share no history. */
export const mergeBase = (a: Hash, b: Hash, parents: Parents): Hash | null => mergeBases(a, b, parents)[0] ?? null

/** Whether `ancestor` is `descendant` or reachable from it (a fast-forward test). Stops as soon as it is found. */
export const isAncestor = (ancestor: Hash, descendant: Hash, parents: Parents): boolean => {
  const seen = new Set<Hash>([descendant])
  const queue: Array<Hash> = [descendant]
  for (let i = 0; i < queue.length; i++) {
    const h = queue[i] as Hash
    if (h === ancestor) return true
    for (const p of parents(h) ?? []) {
      if (seen.has(p)) continue
      seen.add(p)
      queue.push(p)
    }
  }
  return false
}
