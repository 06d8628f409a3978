/**
 * From a flat snapshot (every file by full path) to the canonical trees that store it: one tree
 * per directory, hashed bottom-up, so a merge result can be committed like any other manifest.
 */
import type { Hash } from "../objects/Blake3.ts"
import type { Snapshot } from "../objects/FileChanges.ts"
import { checkPathSet } from "../objects/Path.ts"
import { hashTree, sortEntries } from "../objects/Tree.ts"
import type { TreeEntry } from "../objects/Tree.ts"

export type BuildTreesResult =
  | {
    readonly ok: true
    readonly root: Hash
    /** Every directory's tree, the root included, entries in canonical order. Identical directories share one entry. */
    readonly trees: Map<Hash, ReadonlyArray<TreeEntry>>
  }
  | { readonly ok: false; readonly reason: string }

interface Dir {
  readonly depth: number
  readonly entries: Array<TreeEntry>
  readonly parent: Dir | undefined
  readonly name: string
}

/**
 * The trees of a snapshot. Fails, rather than producing a tree no client could check out, on an
 * invalid path or on a path that is both a file and a directory (`a` and `a/b`). Directories exist
 * only through their files, so the empty snapshot is the empty tree.
 */
export const buildTrees = (snapshot: Snapshot): BuildTreesResult => {
  const paths = checkPathSet(snapshot.keys())
  if (!paths.ok) return paths
  const root: Dir = { depth: 0, entries: [], parent: undefined, name: "" }
  const dirs = new Map<string, Dir>([["", root]])
  const dirOf = (path: string): Dir => {
    const known = dirs.get(path)
    if (known !== undefined) return known
    const slash = path.lastIndexOf("/")
    const parent = dirOf(slash === -1 ? "" : path.slice(0, slash))
    const dir: Dir = { depth: parent.depth + 1, entries: [], parent, name: path.slice(slash + 1) }
    dirs.set(path, dir)
    return dir
  }
  for (const [path, file] of snapshot) {
    const slash = path.lastIndexOf("/")
    dirOf(slash === -1 ? "" : path.slice(0, slash)).entries.push({
      name: path.slice(slash + 1),
      kind: "blob",
      hash: file.hash,
      mode: file.mode
    })
  }
  // Deepest first, so every subdirectory's hash is known before its parent is hashed (no recursion on deep paths).
  const ordered = [...dirs.values()].sort((a, b) => b.depth - a.depth)
  const trees = new Map<Hash, ReadonlyArray<TreeEntry>>()
  let rootHash: Hash = ""
  for (const dir of ordered) {
    const entries = sortEntries(dir.entries)
    const h = hashTree(entries)
    trees.set(h, entries)
    if (dir.parent === undefined) rootHash = h
    else dir.parent.entries.push({ name: dir.name, kind: "tree", hash: h, mode: "tree" })
  }
  return { ok: true, root: rootHash, trees }
}
