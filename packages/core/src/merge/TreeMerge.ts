/**
 * Three-way merges and edits of stored trees at the cost of the paths that changed, not of the
 * trees' size: the merge reads the two sides' differences from the base (`diffTrees`, which never
 * opens a subtree both sides share) and the edit rebuilds only the directories on the way to a
 * changed path. Both answer what the whole-snapshot versions (`mergeSnapshots` over flattened
 * trees, `buildTrees` of the full result) answer, which the tests check.
 */
import type { Hash } from "../objects/Blake3.ts"
import { EMPTY_HASH, hash as hashText } from "../objects/Blake3.ts"
import type { Snapshot } from "../objects/FileChanges.ts"
import { checkPath } from "../objects/Path.ts"
import type { BlobMode, TreeEntry } from "../objects/Tree.ts"
import { encodeSortedTree, sortEntries } from "../objects/Tree.ts"
import { diffTrees } from "./TreeDiff.ts"
import { type MergeResult, mergeSnapshots } from "./ThreeWay.ts"

type File = { readonly hash: Hash; readonly mode: BlobMode }
export type Lookup = (hash: Hash) => ReadonlyArray<TreeEntry> | undefined

export type TreeMergeResult =
  | (MergeResult & {
    readonly ok: true
    /** Base, ours and theirs at every path either side changed (and only there): elsewhere all three agree. */
    readonly base: Snapshot
    readonly ours: Snapshot
    readonly theirs: Snapshot
  })
  | { readonly ok: false; readonly reason: string }

/**
 * `mergeSnapshots` of the three flattened trees, restricted to the paths ours or theirs changed
 * since the base: `merged` holds the result at those paths (every other path keeps the file all
 * three have), `conflicts` are exactly the whole merge's. A file/directory clash always involves
 * changed paths only (an unchanged file cannot sit above or below a path one side added without
 * that side having removed it), so the restriction loses none.
 */
export const mergeTrees = (base: Hash, ours: Hash, theirs: Hash, lookup: Lookup): TreeMergeResult => {
  const toOurs = diffTrees(base, ours, lookup)
  if (!toOurs.ok) return toOurs
  const toTheirs = diffTrees(base, theirs, lookup)
  if (!toTheirs.ok) return toTheirs
  const baseFiles = new Map<string, File>()
  const oursFiles = new Map<string, File>()
  const theirsFiles = new Map<string, File>()
  const oursChanged = new Set([...toOurs.before.keys(), ...toOurs.after.keys()])
  const theirsChanged = new Set([...toTheirs.before.keys(), ...toTheirs.after.keys()])
  const put = (into: Map<string, File>, path: string, file: File | undefined) => {
    if (file !== undefined) into.set(path, file)
  }
  for (const path of oursChanged) {
    put(baseFiles, path, toOurs.before.get(path))
    put(oursFiles, path, toOurs.after.get(path))
    // Theirs left it as the base has it unless it changed it too.
    if (!theirsChanged.has(path)) put(theirsFiles, path, toOurs.before.get(path))
  }
  for (const path of theirsChanged) {
    put(baseFiles, path, toTheirs.before.get(path))
    put(theirsFiles, path, toTheirs.after.get(path))
    if (!oursChanged.has(path)) put(oursFiles, path, toTheirs.before.get(path))
  }
  return { ok: true, base: baseFiles, ours: oursFiles, theirs: theirsFiles, ...mergeSnapshots(baseFiles, oursFiles, theirsFiles) }
}

/** What changes at each path: the new file, or undefined for none. */
export type TreeEdits = ReadonlyMap<string, File | undefined>

/** Path by path, what turns `before` into `after` (both may be restricted to the same set of paths). */
export const editsBetween = (before: Snapshot, after: Snapshot): Map<string, File | undefined> => {
  const edits = new Map<string, File | undefined>()
  for (const [path, old] of before) {
    const now = after.get(path)
    if (now === undefined || now.hash !== old.hash || now.mode !== old.mode) edits.set(path, now)
  }
  for (const [path, now] of after) if (!before.has(path)) edits.set(path, now)
  return edits
}

export type EditTreeResult =
  | {
    readonly ok: true
    readonly root: Hash
    /** The directories that were rebuilt (the root included), by hash, entries in canonical order. */
    readonly trees: Map<Hash, ReadonlyArray<TreeEntry>>
    /** Their canonical text (`encodeTree`), as hashed: what is stored. */
    readonly bodies: Map<Hash, string>
  }
  | { readonly ok: false; readonly reason: string }

interface Node {
  readonly files: Map<string, File | undefined>
  readonly dirs: Map<string, Node>
}

const newNode = (): Node => ({ files: new Map(), dirs: new Map() })

/**
 * The tree `root` with `edits` applied, as `buildTrees` would build the edited snapshot: a new path
 * must be valid, a path cannot be both a file and a directory, and a directory left without files
 * disappears. Only the directories on the way to an edited path are looked up and rebuilt.
 */
export const editTree = (root: Hash, edits: TreeEdits, lookup: Lookup): EditTreeResult => {
  const top = newNode()
  for (const [path, file] of edits) {
    if (file !== undefined) {
      const check = checkPath(path)
      if (!check.ok) return check
    }
    const parts = path.split("/")
    let node = top
    for (const dir of parts.slice(0, -1)) {
      let next = node.dirs.get(dir)
      if (next === undefined) node.dirs.set(dir, next = newNode())
      node = next
    }
    node.files.set(parts.at(-1)!, file)
  }
  const trees = new Map<Hash, ReadonlyArray<TreeEntry>>()
  const bodies = new Map<Hash, string>()
  const rebuild = (hash: Hash | null, node: Node, prefix: string): Hash | null | { readonly reason: string } => {
    const stored = hash === null ? [] : lookup(hash) ?? (hash === EMPTY_HASH ? [] : undefined)
    if (stored === undefined) return { reason: `tree ${hash}${prefix === "" ? "" : ` (at '${prefix}')`} is missing` }
    const entries = new Map(stored.map((e) => [e.name, e]))
    // Directories first: a file removed to make room for a directory (or the reverse) is settled below.
    for (const [name, child] of node.dirs) {
      const path = `${prefix}${name}`
      const current = entries.get(name)
      if (current?.kind === "blob" && !(node.files.has(name) && node.files.get(name) === undefined)) {
        return { reason: `'${path}' is both a file and a directory` }
      }
      const built = rebuild(current?.kind === "tree" ? current.hash : null, child, `${path}/`)
      if (built !== null && typeof built !== "string") return built
      if (built === null) {
        if (current?.kind === "tree") entries.delete(name)
      } else entries.set(name, { name, kind: "tree", hash: built, mode: "tree" })
    }
    for (const [name, file] of node.files) {
      const current = entries.get(name)
      if (file === undefined) {
        if (current?.kind === "blob") entries.delete(name)
        continue
      }
      if (current?.kind === "tree") return { reason: `'${prefix}${name}' is both a file and a directory` }
      entries.set(name, { name, kind: "blob", hash: file.hash, mode: file.mode })
    }
    if (entries.size === 0 && prefix !== "") return null
    // Sorted and encoded once: the body hashed is the one stored.
    const sorted = sortEntries([...entries.values()])
    const body = encodeSortedTree(sorted)
    const rebuilt = hashText(body)
    trees.set(rebuilt, sorted)
    bodies.set(rebuilt, body)
    return rebuilt
  }
  const built = rebuild(root, top, "")
  if (built === null || typeof built !== "string") return { ok: false, reason: built?.reason ?? "the root vanished" }
  return { ok: true, root: built, trees, bodies }
}
