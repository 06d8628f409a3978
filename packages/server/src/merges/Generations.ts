/**
 * Remembered commit generations for the merge bases that planning computes (`MergeBase.generations`), one
 * per ancestry graph `History.ancestry` keeps: with them a merge base walks from the heads down to the base,
 * not both heads' whole history at each merge. Kept beside the graph they are computed from (a WeakMap
 * keyed by it), so they live exactly as long as it does, per server: the graph only grows (commits are added,
 * none changes), which is what remembering needs; a graph read anew gets its own.
 */
import * as MergeBase from "@grove/core/merge/MergeBase"

type Edges = ReadonlyMap<string, ReadonlyArray<string>>

const kept = new WeakMap<Edges, { readonly parents: MergeBase.Parents; readonly generation: MergeBase.Generation }>()

/** The graph's parents lookup and its remembered generations. */
export const ancestryOf = (edges: Edges) => {
  let found = kept.get(edges)
  if (found === undefined) {
    const parents = (h: string) => edges.get(h)
    found = { parents, generation: MergeBase.generations(parents) }
    kept.set(edges, found)
  }
  return found
}
