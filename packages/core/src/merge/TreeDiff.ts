/**
 * What changed between two snapshots, as a commit's `files` list, and the cheap way to find the
 * changed paths between two stored root trees without flattening either.
 */
import type { Hash } from "../objects/Blake3Backend.ts"
import { EMPTY_HASH } from "../objects/Blake3Backend.ts"
import type { FileChange, Snapshot } from "../objects/FileChanges.ts"
import { compareNames, isBlobMode } from "../objects/Tree.ts"
import type { BlobMode, TreeEntry } from "../objects/Tree.ts"

type File = { readonly hash: Hash; readonly mode: BlobMode }

/** Path order: byte order of the UTF-8 paths, the order trees list their entries in. */
export const comparePaths = compareNames

const baseName = (path: string): string => path.slice(path.lastIndexOf("/") + 1)

/**
 * The changes that turn `before` into `after`, sorted by path (a rename sorts by its new path).
 * A file whose hash or mode differs is `modified`. A deleted file and an added file with the same
 * blob hash are one `renamed`: within each hash, pairs that keep their file name (moves) are
 * taken first, then the rest in path order, each deleted path paired with at most one added one.
 * The result always passes `checkFileChangesAgree(changes, before, after)`.
 *
 * A wire contract: the compact pull answer (`compact_v1`, api's PullCompact) leaves out a list equal to this output
 * (through diffTrees) and the client rebuilds it with its own copy, so any change to what this returns (order, pairing,
 * modes, paths) needs a new answer form (`compact_v2`); PullCompact.test pins it on a fixture.
 */
export const diffSnapshots = (before: Snapshot, after: Snapshot): Array<FileChange> => {
  const changes: Array<FileChange> = []
  const deletedByHash = new Map<Hash, Array<string>>()
  const added: Array<string> = []
  for (const [path, old] of before) {
    const now = after.get(path)
    if (now === undefined) {
      const same = deletedByHash.get(old.hash)
      if (same === undefined) deletedByHash.set(old.hash, [path])
      else same.push(path)
    } else if (now.hash !== old.hash || now.mode !== old.mode) {
      changes.push({ path, change_type: "modified", old_blob_hash: old.hash, new_blob_hash: now.hash, old_mode: old.mode, new_mode: now.mode })
    }
  }
  for (const path of after.keys()) if (!before.has(path)) added.push(path)
  added.sort(comparePaths)
  const addedByHash = new Map<Hash, Array<string>>()
  for (const path of added) {
    const h = (after.get(path) as File).hash
    if (!deletedByHash.has(h)) {
      changes.push(addedChange(path, after.get(path) as File))
      continue
    }
    const same = addedByHash.get(h)
    if (same === undefined) addedByHash.set(h, [path])
    else same.push(path)
  }
  for (const [h, deletedPaths] of deletedByHash) {
    deletedPaths.sort(comparePaths)
    const targets = addedByHash.get(h) ?? []
    const pairs = pairRenames(deletedPaths, targets)
    for (const [from, to] of pairs) {
      const old = before.get(from) as File
      const now = after.get(to) as File
      changes.push({ path: to, old_path: from, change_type: "renamed", old_blob_hash: old.hash, new_blob_hash: now.hash, old_mode: old.mode, new_mode: now.mode })
    }
    const paired = new Set(pairs.flat())
    for (const path of deletedPaths) {
      if (!paired.has(path)) changes.push({ path, change_type: "deleted", old_blob_hash: h, new_blob_hash: null, old_mode: (before.get(path) as File).mode })
    }
    for (const path of targets) if (!paired.has(path)) changes.push(addedChange(path, after.get(path) as File))
  }
  return changes.sort((a, b) => comparePaths(a.path, b.path))
}

const addedChange = (path: string, file: File): FileChange => ({
  path,
  change_type: "added",
  old_blob_hash: null,
  new_blob_hash: file.hash,
  new_mode: file.mode
})

/** Deleted and added paths of one blob hash, both sorted: same file name first, then in order. */
const pairRenames = (deleted: ReadonlyArray<string>, added: ReadonlyArray<string>): Array<readonly [string, string]> => {
  const pairs: Array<readonly [string, string]> = []
  const addedByName = new Map<string, Array<string>>()
  for (const path of [...added].reverse()) {
    const same = addedByName.get(baseName(path))
    if (same === undefined) addedByName.set(baseName(path), [path])
    else same.push(path) // reversed, so pop() yields them in path order
  }
  const used = new Set<string>()
  const unpaired: Array<string> = []
  for (const from of deleted) {
    const to = addedByName.get(baseName(from))?.pop()
    if (to === undefined) unpaired.push(from)
    else {
      pairs.push([from, to])
      used.add(to)
    }
  }
  const rest = added.filter((path) => !used.has(path))
  for (let i = 0; i < unpaired.length && i < rest.length; i++) pairs.push([unpaired[i] as string, rest[i] as string])
  return pairs
}

export type DiffTreesResult =
  | { readonly ok: true; readonly before: Snapshot; readonly after: Snapshot }
  | { readonly ok: false; readonly reason: string }

/**
 * The files that differ between root trees `a` (null: no parent, the empty tree) and `b`: each
 * side holds only the paths whose hash or mode differ or exist on one side only. Subtrees with the
 * same hash on both sides are never looked up, so a one-file change in a deep tree costs a few
 * lookups per directory level on the way down.
 *
 * `include` adds paths that are looked up on both sides even when unchanged (the paths a commit's
 * `files` list names): `checkFileChangesAgree(files, before, after)` on the result then answers
 * exactly as it would on the full flattened manifests, at the cost of the changed and named paths only.
 * Which paths it lists (blob modes only) is part of `compact_v1`'s contract: see diffSnapshots.
 */
export const diffTrees = (
  a: Hash | null,
  b: Hash,
  lookup: (hash: Hash) => ReadonlyArray<TreeEntry> | undefined,
  include: Iterable<string> = []
): DiffTreesResult => {
  const before = new Map<string, File>()
  const after = new Map<string, File>()
  const includedFiles = new Set(include)
  // Directories on the way to an included path must be walked even when identical.
  const includedDirs = new Set<string>()
  for (const path of includedFiles) {
    for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) includedDirs.add(path.slice(0, i))
  }
  if (includedFiles.size === 0 && a === b) return { ok: true, before, after }

  // Pending pairs of (old tree, new tree) at a directory path; null is "no directory there".
  const pending: Array<readonly [prefix: string, old: Hash | null, now: Hash | null]> = [["", a ?? EMPTY_HASH, b]]
  const entriesOf = (h: Hash | null, prefix: string): ReadonlyMap<string, TreeEntry> | string => {
    if (h === null) return new Map()
    // The empty tree need not be stored: its hash says what it holds.
    const entries = lookup(h) ?? (h === EMPTY_HASH ? [] : undefined)
    if (entries === undefined) return `tree ${h}${prefix === "" ? "" : ` (at '${prefix}')`} is missing`
    return new Map(entries.map((e) => [e.name, e]))
  }
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [prefix, oldHash, newHash] = next
    const olds = entriesOf(oldHash, prefix)
    if (typeof olds === "string") return { ok: false, reason: olds }
    const news = entriesOf(newHash, prefix)
    if (typeof news === "string") return { ok: false, reason: news }
    for (const name of new Set([...olds.keys(), ...news.keys()])) {
      const path = prefix === "" ? name : `${prefix}/${name}`
      const o = olds.get(name)
      const n = news.get(name)
      const same = o !== undefined && n !== undefined && o.kind === n.kind && o.hash === n.hash && o.mode === n.mode
      if (same && !(o.kind === "tree" ? includedDirs.has(path) : includedFiles.has(path))) continue
      const oTree = o?.kind === "tree" ? o.hash : null
      const nTree = n?.kind === "tree" ? n.hash : null
      if (oTree !== null || nTree !== null) pending.push([path, oTree, nTree])
      if (o !== undefined && o.kind === "blob" && isBlobMode(o.mode)) before.set(path, { hash: o.hash, mode: o.mode })
      if (n !== undefined && n.kind === "blob" && isBlobMode(n.mode)) after.set(path, { hash: n.hash, mode: n.mode })
    }
  }
  return { ok: true, before, after }
}
