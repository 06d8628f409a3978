/**
 * Common ancestors in the commit graph, over both parent and merge-parent edges. Pure over a
 * `parents` lookup (a commit's parent, then merge parent; `undefined` or `[]` for a commit whose
 * parents are unknown or absent, e.g. the edge of a shallow history).
 */
import type { Hash } from "../objects/Blake3.ts"

export type Parents = (hash: Hash) => ReadonlyArray<Hash> | undefined

/**
 * Generation numbers (1 for a commit with no known parent, else one more than its highest parent's) a caller
 * may keep across calls over the same graph, so that a walk near the heads does not first number the whole
 * history. Valid while no commit's parents change: commits may be added, and a commit whose parents were
 * unknown is never kept (nor any descendant of it), so learning them later is safe.
 */
export type Generations = Map<Hash, number>

const kept = new WeakMap<object, Generations>()

/** The generations kept for `graph` (any object that stands for one graph, e.g. its edge map), made on first use. */
export const generationsOf = (graph: object): Generations => {
  let found = kept.get(graph)
  if (found === undefined) kept.set(graph, found = new Map())
  return found
}

/** `h`'s generation; `partial` holds this call's numbers of commits whose history reaches an unknown commit. */
const generation = (h: Hash, parents: Parents, keep: Generations, partial: Map<Hash, number>): number => {
  const known = keep.get(h) ?? partial.get(h)
  if (known !== undefined) return known
  // Depth-first without recursion: a history is thousands of commits deep.
  const stack: Array<Hash> = [h]
  // Commits whose parents are on the stack above them: one met again as a parent closes a cycle (a corrupt
  // graph; hashes cover parents), an edge left out (and nothing of it kept) so that the numbering ends.
  const opened = new Set<Hash>()
  while (stack.length > 0) {
    const top = stack[stack.length - 1] as Hash
    if (keep.has(top) || partial.has(top)) {
      stack.pop()
      continue
    }
    const ps = parents(top)
    let highest = 0
    let complete = ps !== undefined
    let pending = false
    for (const p of ps ?? []) {
      const g = keep.get(p) ?? partial.get(p)
      if (g === undefined && opened.has(p)) complete = false
      else if (g === undefined) {
        stack.push(p)
        pending = true
      } else {
        if (g > highest) highest = g
        if (!keep.has(p)) complete = false
      }
    }
    if (pending) {
      opened.add(top)
      continue
    }
    stack.pop()
    ;(complete ? keep : partial).set(top, highest + 1)
  }
  return (keep.get(h) ?? partial.get(h)) as number
}

/** A max-heap of commits by generation. */
const heap = () => {
  const items: Array<{ readonly hash: Hash; readonly gen: number }> = []
  return {
    get size() {
      return items.length
    },
    push: (item: { readonly hash: Hash; readonly gen: number }) => {
      items.push(item)
      for (let i = items.length - 1; i > 0;) {
        const up = (i - 1) >> 1
        if ((items[up] as typeof item).gen >= item.gen) break
        items[i] = items[up] as typeof item
        items[up] = item
        i = up
      }
    },
    pop: () => {
      const top = items[0] as { readonly hash: Hash; readonly gen: number }
      const last = items.pop() as typeof top
      if (items.length > 0) {
        items[0] = last
        for (let i = 0;;) {
          const l = 2 * i + 1
          const r = l + 1
          let big = i
          if (l < items.length && (items[l] as typeof top).gen > (items[big] as typeof top).gen) big = l
          if (r < items.length && (items[r] as typeof top).gen > (items[big] as typeof top).gen) big = r
          if (big === i) break
          const t = items[i] as typeof top
          items[i] = items[big] as typeof top
          items[big] = t
          i = big
        }
      }
      return top
    }
  }
}

const FROM_A = 1
const FROM_B = 2
const STALE = 4

/** BFS distances from `start` to each of `targets`, not entering commits below generation `floor` (no path to a target goes there). */
const distances = (start: Hash, targets: ReadonlyArray<Hash>, floor: number, gen: (h: Hash) => number, parents: Parents) => {
  const distance = new Map<Hash, number>([[start, 0]])
  let left = targets.filter((t) => t !== start).length
  const queue: Array<Hash> = [start]
  for (let i = 0; i < queue.length && left > 0; i++) {
    const h = queue[i] as Hash
    const d = distance.get(h) as number
    for (const p of parents(h) ?? []) {
      if (distance.has(p) || gen(p) < floor) continue
      distance.set(p, d + 1)
      if (targets.includes(p)) left--
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
 * Walks down from both heads by generation (git's paint-down-to-common): a commit is taken only after all
 * its descendants in the walk, so its marks are final, and the walk stops once every commit still queued is
 * an ancestor of a base found. With `generations` kept by the caller (`generationsOf`) the cost follows the
 * commits since the bases, not the history's length; without, numbering the heads reads their histories once.
 */
export const mergeBases = (a: Hash, b: Hash, parents: Parents, generations: Generations = new Map()): Array<Hash> => {
  if (a === b) return [a]
  const partial = new Map<Hash, number>()
  const gen = (h: Hash) => generation(h, parents, generations, partial)
  const marks = new Map<Hash, number>([[a, FROM_A], [b, FROM_B]])
  const queue = heap()
  queue.push({ hash: a, gen: gen(a) })
  queue.push({ hash: b, gen: gen(b) })
  // Queued commits not (yet) known to be below a base: the walk ends when there are none.
  let live = 2
  const bases: Array<Hash> = []
  while (live > 0) {
    const { hash } = queue.pop()
    let mark = marks.get(hash) as number
    if ((mark & STALE) === 0) {
      live--
      if ((mark & (FROM_A | FROM_B)) === (FROM_A | FROM_B)) {
        bases.push(hash)
        mark |= STALE
      }
    }
    for (const p of parents(hash) ?? []) {
      const before = marks.get(p)
      if (before === undefined) {
        marks.set(p, mark)
        queue.push({ hash: p, gen: gen(p) })
        if ((mark & STALE) === 0) live++
      } else if ((before | mark) !== before) {
        // Still queued: its children all come before it.
        marks.set(p, before | mark)
        if ((before & STALE) === 0 && (mark & STALE) !== 0) live--
      }
    }
  }
  if (bases.length < 2) return bases
  let floor = Infinity
  for (const h of bases) floor = Math.min(floor, gen(h))
  const fromA = distances(a, bases, floor, gen, parents)
  const fromB = distances(b, bases, floor, gen, parents)
  const score = (h: Hash): number => (fromA.get(h) as number) + (fromB.get(h) as number)
  return bases.sort((x, y) => score(x) - score(y) || (x < y ? -1 : x > y ? 1 : 0))
}

/** The merge base of `a` and `b`: the first of `mergeBases`, or null when they share no history. */
export const mergeBase = (a: Hash, b: Hash, parents: Parents, generations?: Generations): Hash | null =>
  mergeBases(a, b, parents, generations)[0] ?? null

/**
 * Whether `ancestor` is `descendant` or reachable from it (a fast-forward test). Stops as soon as it is found;
 * with the caller's `generations`, it does not go below `ancestor`'s generation either (nothing there reaches it).
 */
export const isAncestor = (ancestor: Hash, descendant: Hash, parents: Parents, generations?: Generations): boolean => {
  const partial = new Map<Hash, number>()
  const floor = generations === undefined ? 0 : generation(ancestor, parents, generations, partial)
  const seen = new Set<Hash>([descendant])
  const queue: Array<Hash> = [descendant]
  for (let i = 0; i < queue.length; i++) {
    const h = queue[i] as Hash
    if (h === ancestor) return true
    for (const p of parents(h) ?? []) {
      if (seen.has(p)) continue
      seen.add(p)
      if (generations !== undefined && generation(p, parents, generations, partial) < floor) continue
      queue.push(p)
    }
  }
  return false
}
