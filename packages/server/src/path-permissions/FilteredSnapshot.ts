/**
 * A snapshot source (zip, git) without the files a caller may not read. Exporters walk trees by
 * hash; here a tree is named by its hash and its path (`<hash>:<dir/>`), so the same tree at two
 * paths is filtered for each, and nothing cached under a real tree hash is ever a filtered view.
 */
import { Effect } from "effect"
import type { SnapshotSource } from "../export/SnapshotSource.ts"

/** The root of `tree` as the filtered source names it. */
export const filteredRoot = (tree: string): string => `${tree}:`

export const filteredSnapshot = <E>(source: SnapshotSource<E>, canRead: (path: string) => boolean): SnapshotSource<E> => ({
  readTree: (id) => {
    const colon = id.indexOf(":")
    const hash = colon < 0 ? id : id.slice(0, colon)
    const prefix = colon < 0 ? "" : id.slice(colon + 1)
    return Effect.map(source.readTree(hash), (entries) =>
      entries.flatMap((entry) => {
        const path = `${prefix}${entry.name}`
        if (entry.kind === "tree") return [{ ...entry, hash: `${entry.hash}:${path}/` }]
        return canRead(path) ? [entry] : []
      }))
  },
  readBlob: source.readBlob,
  blobSize: source.blobSize
})
