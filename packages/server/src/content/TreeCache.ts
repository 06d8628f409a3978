/**
 * A request-scoped view of an organization's trees: the ones a push carries
 * plus the stored ones, loaded from the database on demand. The pure walks of
 * `@grove/core` take a synchronous lookup; `resolve` reruns such a walk,
 * loading the trees it missed in one query per round, until nothing is
 * missing or the missing trees do not exist. Within a round a tree not loaded
 * yet reads as empty, so the walk goes on past it and one round finds every
 * missing tree of a level (rounds follow the depth, not the number of trees);
 * only a round that missed nothing answers.
 */
import type * as Tree from "@grove/core/objects/Tree"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { ContentObjects } from "./ContentObjects.ts"

export type Lookup = (hash: string) => ReadonlyArray<Tree.TreeEntry> | undefined

export interface TreeCache {
  readonly get: Lookup
  readonly add: (hash: string, entries: ReadonlyArray<Tree.TreeEntry>) => void
  /** Loads whichever of `hashes` are not cached yet. */
  readonly load: (hashes: Iterable<string>) => Effect.Effect<void, SqlError>
  /** Runs `walk` until it no longer misses a tree that exists. */
  readonly resolve: <A>(walk: (lookup: Lookup) => A) => Effect.Effect<A, SqlError>
}

export const makeTreeCache = (objects: ContentObjects["Service"], orgId: string): TreeCache => {
  const trees = new Map<string, ReadonlyArray<Tree.TreeEntry>>([[Blake3.EMPTY_HASH, []]])
  const absent = new Set<string>()
  const load = (hashes: Iterable<string>) =>
    Effect.gen(function*() {
      const wanted = [...new Set(hashes)].filter((h) => !trees.has(h) && !absent.has(h))
      if (wanted.length === 0) return
      const found = yield* objects.loadTrees(orgId, wanted)
      for (const h of wanted) {
        const entries = found.get(h)
        if (entries === undefined) absent.add(h)
        else trees.set(h, entries)
      }
    })
  const resolve = <A>(walk: (lookup: Lookup) => A) =>
    Effect.gen(function*() {
      for (;;) {
        const missed = new Set<string>()
        const result = walk((h) => {
          const entries = trees.get(h)
          if (entries !== undefined || absent.has(h)) return entries
          missed.add(h)
          return []
        })
        if (missed.size === 0) return result
        yield* load(missed)
      }
    })
  return { get: (h) => trees.get(h), add: (h, e) => void trees.set(h, e), load, resolve }
}
