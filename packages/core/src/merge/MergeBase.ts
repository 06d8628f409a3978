/**
 * Common ancestors in the commit graph, over both parent and merge-parent edges. Pure over a
 * `parents` lookup (a commit's parent, then merge parent; `undefined` or `[]` for a commit whose
 * parents are unknown or absent, e.g. the edge of a shallow history).
 */
import type { Hash } from "../objects/Blake3.ts"

export type Parents = (hash: Hash) => ReadonlyArray<Hash> | undefined

/**
 * A commit's generation: 0 for a root (or a commit whose parents are unknown), else one more than its
 * highest parent's. Every parent's is lower than its child's, so a walk that takes commits highest
 * generation first has seen every path to a commit before it takes it.
 */
export type Generation = (hash: Hash) => number

/**
 * Generations over `parents`, remembered: a commit's parents never change (its hash covers them), so a
 * generation computed once holds, as long as `parents` answers for each commit what it always answers.
 * One whose history reaches a commit whose parents are unknown is not remembered (they may become
 * known later and raise it): it is computed again at each call. Keep one per commit graph, for as long
 * as the graph only grows.
 */
export const generations = (parents: Parents): Generation => {
  const known = new Map<Hash, number>()
  return (start) => {
    const hit = known.get(start)
    if (hit !== undefined) return hit
    // Not remembered: below an unknown parent, so computed per call.
    const partial = new Map<Hash, number>()
    const visiting = new Set<Hash>([start])
    const stack: Array<Hash> = [start]
    while (stack.length > 0) {
      const h = stack[stack.length - 1] as Hash
      const ps = parents(h)
      let ready = true
      for (const p of ps ?? []) {
        // A parent on the walk's own path (no commit graph has one) counts as unknown.
        if (known.has(p) || partial.has(p) || visiting.has(p)) continue
        visiting.add(p)
        stack.push(p)
        ready = false
      }
      if (!ready) continue
      stack.pop()
      visiting.delete(h)
      let generation = 0
      let complete = ps !== undefined
      for (const p of ps ?? []) {
        const g = known.get(p) ?? partial.get(p)
        if (g === undefined || partial.has(p)) complete = false
        if (g !== undefined && g + 1 > generation) generation = g + 1
      }
      if (complete) known.set(h, generation)
      else partial.set(h, generation)
    }
    return (known.get(start) ?? partial.get(start)) as number
  }
}

/** Reached from `a`, from `b`, and below a common ancestor (so not a best one). */
const FROM_A = 1
const FROM_B = 2
const BELOW_COMMON = 4
/** Taken from the heap (its parents were reached). */
const TAKEN = 8

interface Visit {
  readonly hash: Hash
  readonly generation: number
  flags: number
  /** Shortest distance from `a` (from `b`) over the commits taken so far; Infinity when not reached. */
  fromA: number
  fromB: number
}

/** A binary max-heap of visits by generation: the highest out. */
const takeHighest = (heap: Array<Visit>): Visit => {
  const top = heap[0] as Visit
  const last = heap.pop() as Visit
  const n = heap.length
  if (n === 0) return top
  let i = 0
  for (;;) {
    let child = 2 * i + 1
    if (child >= n) break
    if (child + 1 < n && (heap[child + 1] as Visit).generation > (heap[child] as Visit).generation) child++
    if ((heap[child] as Visit).generation <= last.generation) break
    heap[i] = heap[child] as Visit
    i = child
  }
  heap[i] = last
  return top
}
/** Into the heap. */
const put = (heap: Array<Visit>, visit: Visit): void => {
  let i = heap.length
  heap.push(visit)
  while (i > 0) {
    const up = (i - 1) >> 1
    if ((heap[up] as Visit).generation >= visit.generation) break
    heap[i] = heap[up] as Visit
    i = up
  }
  heap[i] = visit
}

/**
 * The best common ancestors of `a` and `b`: common ancestors that are not an ancestor of another
 * common ancestor. Nearest first (sum of the shortest distances from `a` and `b`, as a breadth-first
 * walk counts them), ties by hash, so the order is deterministic. Empty when the histories are unrelated.
 *
 * Takes commits highest generation first, so each is taken after every commit above it on the way
 * down from `a` and `b`: its reach and distances are final when it is taken. A common ancestor not below
 * another is a best one; the walk stops once every commit left is below a common ancestor. It reads the
 * commits from the heads down to the best bases, not the whole history, when `generation` remembers
 * (`generations`, kept by the caller); without one, each call computes them over both histories.
 */
export const mergeBases = (a: Hash, b: Hash, parents: Parents, generation: Generation = generations(parents)): Array<Hash> => {
  if (a === b) return [a]
  const visits = new Map<Hash, Visit>()
  const heap: Array<Visit> = []
  let open = 0 // visits in the heap not below a common ancestor
  const reach = (hash: Hash, flags: number, fromA: number, fromB: number) => {
    let visit = visits.get(hash)
    if (visit === undefined) {
      visit = { hash, generation: generation(hash), flags, fromA, fromB }
      visits.set(hash, visit)
      put(heap, visit)
      if ((flags & BELOW_COMMON) === 0) open++
      return
    }
    // A parent's generation is below its child's, so a commit taken is not reached again; if a
    // generation function broke that, what was taken stays as it was taken.
    if ((visit.flags & TAKEN) !== 0) return
    if ((visit.flags & BELOW_COMMON) === 0 && (flags & BELOW_COMMON) !== 0) open--
    visit.flags |= flags
    if (fromA < visit.fromA) visit.fromA = fromA
    if (fromB < visit.fromB) visit.fromB = fromB
  }
  reach(a, FROM_A, 0, Infinity)
  reach(b, FROM_B, Infinity, 0)
  const best: Array<Visit> = []
  while (open > 0) {
    const visit = takeHighest(heap)
    visit.flags |= TAKEN
    let flags = visit.flags & ~TAKEN
    if ((flags & BELOW_COMMON) === 0) {
      open--
      if ((flags & (FROM_A | FROM_B)) === (FROM_A | FROM_B)) {
        best.push(visit)
        flags |= BELOW_COMMON
      }
    }
    for (const p of parents(visit.hash) ?? []) reach(p, flags, visit.fromA + 1, visit.fromB + 1)
  }
  const score = (v: Visit): number => v.fromA + v.fromB
  return best
    .sort((x, y) => score(x) - score(y) || (x.hash < y.hash ? -1 : x.hash > y.hash ? 1 : 0))
    .map((v) => v.hash)
}

/** The merge base of `a` and `b`: the first of `mergeBases`, or null when they share no history. */
export const mergeBase = (a: Hash, b: Hash, parents: Parents, generation?: Generation): Hash | null =>
  mergeBases(a, b, parents, generation)[0] ?? null

/**
 * Whether `ancestor` is `descendant` or reachable from it (a fast-forward test). Stops as soon as it is
 * found; with `generation`, it never goes below the ancestor's generation either.
 */
export const isAncestor = (ancestor: Hash, descendant: Hash, parents: Parents, generation?: Generation): boolean => {
  const floor = generation === undefined ? -Infinity : generation(ancestor)
  const seen = new Set<Hash>([descendant])
  const queue: Array<Hash> = [descendant]
  for (let i = 0; i < queue.length; i++) {
    const h = queue[i] as Hash
    if (h === ancestor) return true
    for (const p of parents(h) ?? []) {
      if (seen.has(p)) continue
      seen.add(p)
      if (generation !== undefined && generation(p) < floor) continue
      queue.push(p)
    }
  }
  return false
}
