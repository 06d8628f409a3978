/**
 * Three-way merge of snapshots, path by path: what the server does for a branch merge (409 with
 * `conflict_paths` unless `conflicts` is empty) and what the client does on pull before merging
 * the text of conflicting files.
 */
import type { Hash } from "../objects/Blake3.ts"
import type { Snapshot } from "../objects/FileChanges.ts"
import type { BlobMode } from "../objects/Tree.ts"
import { comparePaths } from "./TreeDiff.ts"

type File = { readonly hash: Hash; readonly mode: BlobMode }

export type ConflictKind =
  /** Both sides changed the content differently. */
  | "content"
  /** Both sides added the path with different content or mode. */
  | "add_add"
  /** Ours modified the file, theirs deleted it. */
  | "modify_delete"
  /** Ours deleted the file, theirs modified it. */
  | "delete_modify"
  /** Same content, but both sides changed the mode differently. */
  | "mode"
  /** A file where the other side has files below the same path. */
  | "file_directory"

export interface Conflict {
  readonly path: string
  readonly kind: ConflictKind
}

export interface MergeResult {
  /**
   * Every cleanly merged file; at a conflicting path, ours' version (or none). This is what the
   * client checks out around its conflict markers; a server refuses the merge instead.
   */
  readonly merged: Snapshot
  /** One entry per conflicting path, sorted by path. */
  readonly conflicts: ReadonlyArray<Conflict>
}

const sameFile = (x: File | undefined, y: File | undefined): boolean =>
  x === y || (x !== undefined && y !== undefined && x.hash === y.hash && x.mode === y.mode)

/**
 * Merges per path, where a file is (hash, mode): a side that left it unchanged yields to the side that
 * changed it; a path conflicts when both sides changed it differently (content or mode), when both
 * added it differently, when one side deleted what the other changed, and when the clean result
 * would hold a file where it also holds a directory.
 */
export const mergeSnapshots = (base: Snapshot, ours: Snapshot, theirs: Snapshot): MergeResult => {
  const merged = new Map<string, File>()
  const conflicts = new Map<string, Conflict["kind"]>()
  const paths = new Set([...base.keys(), ...ours.keys(), ...theirs.keys()])
  for (const path of paths) {
    const b = base.get(path)
    const o = ours.get(path)
    const t = theirs.get(path)
    if (sameFile(o, t) || sameFile(b, t)) {
      if (o !== undefined) merged.set(path, o)
      continue
    }
    if (sameFile(b, o)) {
      if (t !== undefined) merged.set(path, t)
      continue
    }
    // Both sides changed the path, differently.
    if (o !== undefined) merged.set(path, o)
    if (b === undefined) conflicts.set(path, "add_add")
    else if (t === undefined) conflicts.set(path, "modify_delete")
    else if (o === undefined) conflicts.set(path, "delete_modify")
    // A file's identity is its content and mode together (issue 4): one side's edit and the other's
    // chmod conflict too, as content when the bytes differ, else as mode.
    else conflicts.set(path, o.hash !== t.hash ? "content" : "mode")
  }
  resolveFileDirectory(merged, ours, theirs, conflicts)
  const sorted = [...conflicts].map(([path, kind]) => ({ path, kind })).sort((x, y) => comparePaths(x.path, y.path))
  return { merged, conflicts: sorted }
}

/**
 * A file `a` with files below `a/` among the merge's candidates (the clean results, and both
 * sides' versions of conflicting paths, so the answer does not depend on which side is ours):
 * every candidate from the topmost such file down conflicts and takes ours' version. Ours is a
 * valid snapshot, so the result is one again.
 */
const resolveFileDirectory = (merged: Map<string, File>, ours: Snapshot, theirs: Snapshot, conflicts: Map<string, Conflict["kind"]>): void => {
  const candidates = new Set(merged.keys())
  for (const path of conflicts.keys()) if (theirs.has(path)) candidates.add(path)
  const tops = new Set<string>()
  for (const path of candidates) {
    for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) {
      if (candidates.has(path.slice(0, i))) {
        tops.add(path.slice(0, i))
        break // the shortest prefix is the topmost file above this path
      }
    }
  }
  if (tops.size === 0) return
  const under = (path: string): boolean => {
    if (tops.has(path)) return true
    for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) if (tops.has(path.slice(0, i))) return true
    return false
  }
  for (const path of candidates) {
    if (!under(path)) continue
    if (!conflicts.has(path)) conflicts.set(path, "file_directory")
    const o = ours.get(path)
    if (o === undefined) merged.delete(path)
    else merged.set(path, o)
  }
}
