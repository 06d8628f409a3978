/**
 * Decoded trees shared by the merges, syncs and reverts this server plans. A tree is immutable (its hash
 * covers its body) and stored per organization, so an entry keyed by organization and hash is never stale.
 * Serialized merges on one repository read the same trees again and again: main's root and the directories
 * on the way to each change were built by the previous merge (writeCommit remembers them here), and the
 * merge base's were read by the merges before. Without this, each merge read them back, one statement per
 * level of the tree, and decoded them again. Beside them, the root tree (manifest) of the commits planning
 * read: a commit's row never changes its manifest (its hash covers it), and a merge's base is nearly always a
 * commit an earlier merge read as main's head, so its manifest costs no read. One per server (its layer), so
 * two servers in one process, and tests, do not share what they keep.
 */
import type * as Tree from "@grove/core/objects/Tree"
import { Context, Effect, Layer } from "effect"
import { ContentObjects } from "../content/ContentObjects.ts"
import { makeTreeCache, type TreeCache } from "../content/TreeCache.ts"

type Entries = ReadonlyArray<Tree.TreeEntry>

/** At most this many entries (summed over the trees) are kept: a few MiB; least recently used go first. */
export const KEPT_ENTRIES = 20_000
/** At most this many commits' manifests are kept (all forgotten at once past it). */
const MANIFESTS_KEPT = 10_000

export class PlanningTrees extends Context.Service<PlanningTrees, {
  /** A tree `orgId` has stored, as decoded (or built) here. */
  readonly remember: (orgId: string, hash: string, entries: Entries) => void
  /** A planning's view of the organization's trees (`TreeCache`), reading only those not kept here. */
  readonly view: (orgId: string) => TreeCache
  /** The manifest of commit `hash` of the repository, as read before; undefined if not kept. */
  readonly manifest: (repoId: string, hash: string) => string | undefined
  readonly rememberManifest: (repoId: string, hash: string, manifest: string) => void
}>()("grove/server/merges/PlanningTrees") {
  static readonly layer = Layer.effect(PlanningTrees, Effect.gen(function*() {
    return makePlanningTrees(yield* ContentObjects)
  }))
}

/** The service over `objects` (the layer's; tests give a store of their own). */
export const makePlanningTrees = (objects: ContentObjects["Service"]): PlanningTrees["Service"] => {
  const kept = new Map<string, Entries>()
  let keptEntries = 0
  const manifests = new Map<string, string>()
  const keyOf = (orgId: string, hash: string) => `${orgId}:${hash}`

  const remember = (orgId: string, hash: string, entries: Entries): void => {
    const key = keyOf(orgId, hash)
    const cost = entries.length + 1
    if (cost > KEPT_ENTRIES) return
    const old = kept.get(key)
    if (old !== undefined) {
      kept.delete(key)
      keptEntries -= old.length + 1
    }
    kept.set(key, entries)
    keptEntries += cost
    for (const [k, e] of kept) {
      if (keptEntries <= KEPT_ENTRIES) break
      kept.delete(k)
      keptEntries -= e.length + 1
    }
  }

  const recall = (orgId: string, hash: string): Entries | undefined => {
    const key = keyOf(orgId, hash)
    const entries = kept.get(key)
    if (entries !== undefined) {
      // Most recently used last: the first in the map are the first to go.
      kept.delete(key)
      kept.set(key, entries)
    }
    return entries
  }

  /** `objects` whose `loadTrees` answers the trees kept here without a read, and keeps what it reads. */
  const remembering: ContentObjects["Service"] = {
    ...objects,
    loadTrees: (orgId, hashes) =>
      Effect.suspend(() => {
        const out = new Map<string, Entries>()
        const missing: Array<string> = []
        for (const hash of hashes) {
          const entries = recall(orgId, hash)
          if (entries === undefined) missing.push(hash)
          else out.set(hash, entries)
        }
        if (missing.length === 0) return Effect.succeed(out)
        return Effect.map(objects.loadTrees(orgId, missing), (found) => {
          for (const [hash, entries] of found) {
            remember(orgId, hash, entries)
            out.set(hash, entries)
          }
          return out
        })
      })
  }

  return PlanningTrees.of({
    remember,
    view: (orgId) => makeTreeCache(remembering, orgId),
    manifest: (repoId, hash) => manifests.get(keyOf(repoId, hash)),
    rememberManifest: (repoId, hash, manifest) => {
      if (manifests.size >= MANIFESTS_KEPT) manifests.clear()
      manifests.set(keyOf(repoId, hash), manifest)
    }
  })
}
