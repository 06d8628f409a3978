/**
 * The trees of a snapshot, rebuilt only where it changed: given the snapshot a
 * commit had and the tree hash of each of its directories (kept in the index),
 * only the directories on the path of an added, removed or changed file are
 * encoded and hashed again. Without that the result is the whole build; either
 * way it equals core's `Merge.Snapshots.buildTrees` (same root, same trees for
 * the directories it rebuilds), which the tests check.
 */
import { Objects } from "@grove/core"

type Hash = string
type TreeEntry = Objects.Tree.TreeEntry
type Snapshot = Objects.FileChanges.Snapshot

/** Directory path ("" for the root) -> its tree hash. */
export type DirTrees = ReadonlyMap<string, Hash>

export interface Previous {
  readonly snapshot: Snapshot
  readonly dirs: DirTrees
}

export type TreeBuild =
  | {
    readonly ok: true
    readonly root: Hash
    /** The trees that were (re)built, by hash; the others are the previous commit's, stored already. */
    readonly trees: Map<Hash, ReadonlyArray<TreeEntry>>
    readonly dirs: Map<string, Hash>
  }
  | { readonly ok: false; readonly reason: string }

interface Dir {
  readonly path: string
  readonly depth: number
  readonly files: Array<TreeEntry>
  readonly subdirs: Array<string>
}

const parentOf = (path: string): string => {
  const slash = path.lastIndexOf("/")
  return slash === -1 ? "" : path.slice(0, slash)
}

const nameOf = (path: string): string => path.slice(path.lastIndexOf("/") + 1)

/**
 * The trees of `snapshot`. With `previous`, directories none of whose files changed keep their
 * previous hash and are not rebuilt. Fails on an invalid path (only new paths are checked: the
 * others were valid in the previous commit) and on a path that is both a file and a directory.
 */
export const buildTreesFrom = (snapshot: Snapshot, previous?: Previous): TreeBuild => {
  const dirs = new Map<string, Dir>([["", { path: "", depth: 0, files: [], subdirs: [] }]])
  const dirOf = (path: string): Dir => {
    const known = dirs.get(path)
    if (known !== undefined) return known
    const parent = dirOf(parentOf(path))
    const dir: Dir = { path, depth: parent.depth + 1, files: [], subdirs: [] }
    parent.subdirs.push(path)
    dirs.set(path, dir)
    return dir
  }
  const dirty = new Set<string>()
  const markDirty = (file: string) => {
    for (let dir = parentOf(file); !dirty.has(dir); dir = parentOf(dir)) {
      dirty.add(dir)
      if (dir === "") break
    }
  }
  for (const [path, file] of snapshot) {
    const before = previous?.snapshot.get(path)
    if (before === undefined) {
      const check = Objects.Path.checkPath(path)
      if (!check.ok) return check
    }
    if (before === undefined || before.hash !== file.hash || before.mode !== file.mode) markDirty(path)
    dirOf(parentOf(path)).files.push({ name: nameOf(path), kind: "blob", hash: file.hash, mode: file.mode })
  }
  for (const path of snapshot.keys()) {
    if (dirs.has(path)) {
      const inside = [...snapshot.keys()].find((p) => p.startsWith(`${path}/`))
      return { ok: false, reason: `'${path}' is both a file and a directory (of '${inside}')` }
    }
  }
  if (previous !== undefined) for (const path of previous.snapshot.keys()) if (!snapshot.has(path)) markDirty(path)
  const hashes = new Map<string, Hash>()
  const trees = new Map<Hash, ReadonlyArray<TreeEntry>>()
  // Deepest first, so every subdirectory's hash is known before its parent's tree is encoded.
  for (const dir of [...dirs.values()].sort((a, b) => b.depth - a.depth)) {
    const kept = previous === undefined || dirty.has(dir.path) ? undefined : previous.dirs.get(dir.path)
    if (kept !== undefined) {
      hashes.set(dir.path, kept)
      continue
    }
    const entries: Array<TreeEntry> = [...dir.files]
    for (const sub of dir.subdirs) entries.push({ name: nameOf(sub), kind: "tree", hash: hashes.get(sub)!, mode: "tree" })
    const sorted = Objects.Tree.sortEntries(entries)
    const hash = Objects.Tree.hashTree(sorted)
    trees.set(hash, sorted)
    hashes.set(dir.path, hash)
  }
  return { ok: true, root: hashes.get("")!, trees, dirs: hashes }
}
