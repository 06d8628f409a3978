/**
 * Grove's compact pull answer (`pull_answer: "compact_v1"` in `capabilities`), a Grove extension of the sync
 * protocol's `GET pull` for its own client. Asked by `Accept: application/vnd.grove.pull-compact-v1+json` and answered
 * with that content type, it is the PullResponse without what the client can rebuild from the rest of the answer:
 *
 * - a commit's `files` (not part of its hash) when the commit has no parent or its parent is in the same answer, and
 *   the stored list is exactly the canonical one (`canonicalFiles`: core's diffTrees and diffSnapshots, in the wire
 *   form), which the client rebuilds from the answer's trees once it has checked them. Any other list is sent, and so
 *   is a short one (under LEAVE_OUT_FROM changes): its diff costs each side ~100 µs, its JSON ~5 µs a change;
 * - a blob's `content` (always empty on a pull) and, when the blob is one chunk whose hash is the blob's
 *   (`[{hash, offset: 0, size}]`), its `chunks`: a blob with neither is that one chunk. A blob that has no chunk list
 *   in the plain answer keeps its `content: []`.
 *
 * An empty list stays in the answer (an empty blob's `chunks: []`, a commit that changed nothing). Every other client
 * (the Oak client asks for `application/json`) gets the plain answer; a server without the extension ignores the
 * header and answers `application/json`, which grove's client reads as before. For the 5,000-file clone of the
 * content benchmark the answer goes from 2.78 MB to about 1.2 MB.
 */
import * as TreeDiff from "@grove/core/merge/TreeDiff"
import { EMPTY_HASH } from "@grove/core/objects/Blake3Backend"
import { CONTENT_TYPE } from "@grove/core/objects/CompactPull"
import { isBlobMode, type TreeEntry } from "@grove/core/objects/TreeText"
import { Schema } from "effect"
import * as S from "./Sync.ts"

const { comparePaths } = TreeDiff

export { ACCEPT, acceptsCompact, CAPABILITY, COMPACT_V1, CONTENT_TYPE, isCompact } from "@grove/core/objects/CompactPull"

/** A commit whose `files` may be left out (see above). */
export const CompactCommitData = Schema.Struct({ ...S.CommitData.fields, files: Schema.optionalKey(S.CommitData.fields.files) })
export type CompactCommitData = typeof CompactCommitData.Type
/** A blob whose `content` and one-chunk `chunks` may be left out. */
export const CompactBlobData = Schema.Struct({ ...S.BlobData.fields, content: Schema.optionalKey(S.ByteArray) })
export type CompactBlobData = typeof CompactBlobData.Type

export const CompactPullResponse = Schema.Struct({
  ...S.PullResponse.fields,
  commits: Schema.Array(CompactCommitData),
  blobs: Schema.Array(CompactBlobData)
}).annotate({
  description: "Grove's compact pull answer (capability pull_answer: compact_v1), for `Accept: " + CONTENT_TYPE + "`: the plain " +
    "answer without a commit's `files` when the commit has no parent or its parent is in the answer and the list is the " +
    "canonical diff of the two manifests (sorted by path, renames paired as core's diffSnapshots does), and without a " +
    "blob's `content` (always empty) and, when the blob is its one chunk, its `chunks` (a blob with neither is " +
    "`[{hash, offset: 0, size}]`). The client rebuilds them from the answer's trees."
})
export type CompactPullResponse = typeof CompactPullResponse.Type

/**
 * The canonical `files` of a commit whose parent's manifest is `parent` (null: no parent) and whose own is `manifest`:
 * what grove's client and the server's merges write (core's diffSnapshots, sorted by path), in the wire form.
 * Undefined when a tree is missing.
 *
 * FROZEN for compact_v1: the server compares a stored list with ITS output and the client rebuilds with ITS own, so
 * a change here, in addedFiles or in core's diffTrees / diffSnapshots / comparePaths would make older clients and
 * servers store other `files` than the server holds, silently (files are not in the commit hash). Such a change
 * needs a new form (`compact_v2`: its own media type and capability value, v1 still answered by the old algorithm);
 * PullCompact.test pins this output on PullCompact.fixture.json.
 */
export const canonicalFiles = (
  parent: string | null,
  manifest: string,
  lookup: (hash: string) => ReadonlyArray<TreeEntry> | undefined
): Array<S.FileChangeData> | undefined => {
  if (parent === null) return addedFiles(manifest, lookup)
  const diff = TreeDiff.diffTrees(parent, manifest, lookup)
  return diff.ok ? TreeDiff.diffSnapshots(diff.before, diff.after).map(S.toFileChangeData) : undefined
}

/** A tree entry's place among its siblings in path order: a directory's paths continue its name with "/". */
const keyOf = (entry: TreeEntry) => entry.kind === "tree" ? `${entry.name}/` : entry.name
const inPathOrder = (entries: ReadonlyArray<TreeEntry>): ReadonlyArray<TreeEntry> => {
  for (let i = 1; i < entries.length; i++) {
    if (comparePaths(keyOf(entries[i - 1]!), keyOf(entries[i]!)) >= 0) {
      return [...entries].sort((a, b) => comparePaths(keyOf(a), keyOf(b)))
    }
  }
  return entries
}

/**
 * A root commit's canonical files, every file `added`, as diffSnapshots(empty, files) gives them but without its sort
 * (~20-50 ms for 5,000 files in a fresh process): the trees are walked in path order, each tree's entries ordered by
 * name, a directory's name followed by "/".
 */
const addedFiles = (root: string, lookup: (hash: string) => ReadonlyArray<TreeEntry> | undefined): Array<S.FileChangeData> | undefined => {
  const files: Array<S.FileChangeData> = []
  const pending: Array<readonly [prefix: string, entry: TreeEntry]> = []
  const push = (prefix: string, hash: string) => {
    const entries = lookup(hash) ?? (hash === EMPTY_HASH ? [] : undefined)
    if (entries === undefined) return false
    const ordered = inPathOrder(entries)
    for (let i = ordered.length - 1; i >= 0; i--) pending.push([prefix, ordered[i]!])
    return true
  }
  if (!push("", root)) return undefined
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [prefix, entry] = next
    const path = prefix + entry.name
    if (entry.kind === "tree") {
      if (!push(`${path}/`, entry.hash)) return undefined
    } else if (isBlobMode(entry.mode)) {
      files.push({ path, change_type: "added", old_blob_hash: null, new_blob_hash: entry.hash, new_mode: entry.mode })
    }
  }
  return files
}

const CHANGE_KEYS = ["path", "change_type", "old_blob_hash", "new_blob_hash", "old_path", "old_mode", "new_mode"] as const

/** Whether `files` holds exactly `canonical`'s changes in its order, the same keys with the same values. */
export const sameFiles = (files: ReadonlyArray<S.FileChangeData>, canonical: ReadonlyArray<S.FileChangeData>): boolean => {
  if (files.length !== canonical.length) return false
  for (let i = 0; i < files.length; i++) {
    const a = files[i]!, b = canonical[i]!
    let keys = 0
    for (const key of CHANGE_KEYS) {
      const has = Object.hasOwn(a, key)
      if (has !== Object.hasOwn(b, key) || a[key] !== b[key]) return false
      if (has) keys++
    }
    if (Object.keys(a).length !== keys) return false
  }
  return true
}

const isOneChunk = (blob: S.BlobData): boolean => {
  const chunks = blob.chunks
  if (chunks === undefined || chunks.length !== 1) return false
  const only = chunks[0]!
  return only.hash === blob.hash && only.offset === 0 && only.size === blob.size && Object.keys(only).length === 3
}

/** The entries of a tree of `trees` by its hash (the empty tree's without being sent), for canonicalFiles and walks. */
export const treeLookup = (trees: ReadonlyArray<{ readonly hash: string; readonly entries: ReadonlyArray<unknown> }>) => {
  const byHash = new Map(trees.map((tree) => [tree.hash, tree.entries as ReadonlyArray<TreeEntry>]))
  return (hash: string): ReadonlyArray<TreeEntry> | undefined => byHash.get(hash) ?? (hash === EMPTY_HASH ? [] : undefined)
}

/**
 * The shortest files list the server leaves out. A one-file commit's diff walks its path's trees (~100 µs in a
 * 5,000-file tree, on each side) where its JSON costs ~5 µs; a 5,000-file root commit's list is 1 MB of the answer,
 * ~20 ms of the client's parse and decode, and its rebuild ~6 ms.
 */
export const LEAVE_OUT_FROM = 100

/** The compact form of a plain pull answer (see above): what it leaves out, `expandBlobs` and `rebuildFiles` put back. */
export const compact = (answer: S.PullResponse, leaveOutFrom = LEAVE_OUT_FROM): CompactPullResponse => {
  const manifests = new Map(answer.commits.map((c) => [c.hash, c.manifest_hash]))
  let lookup: ReturnType<typeof treeLookup> | undefined
  const commits = answer.commits.map((commit): CompactCommitData => {
    const parent = commit.parent_hash == null ? null : manifests.get(commit.parent_hash)
    if (parent === undefined || commit.files.length < leaveOutFrom) return commit
    const canonical = canonicalFiles(parent, commit.manifest_hash, lookup ??= treeLookup(answer.trees))
    if (canonical === undefined || !sameFiles(commit.files, canonical)) return commit
    const { files: _, ...rest } = commit
    return rest
  })
  const blobs = answer.blobs.map((blob): CompactBlobData => {
    if (blob.content.length > 0 || blob.chunks === undefined) return blob
    const { content: _, chunks, ...rest } = blob
    return isOneChunk(blob) ? rest : { ...rest, chunks }
  })
  return { ...answer, commits, blobs }
}

/**
 * A compact answer's blobs in the plain form: `content: []`, and a blob sent with neither `content` nor `chunks` is
 * its one chunk. The commits keep their left-out `files`, which `rebuildFiles` gives once the trees are checked.
 */
export const expandBlobs = (blobs: ReadonlyArray<CompactBlobData>): Array<S.BlobData> =>
  blobs.map((blob) => {
    if (blob.content !== undefined) return blob as S.BlobData
    const { hash, size } = blob
    const chunks = blob.chunks ?? [{ hash, offset: 0, size }]
    return blob.mapping_proof_token === undefined
      ? { hash, content: [], size, chunks }
      : { hash, content: [], size, chunks, mapping_proof_token: blob.mapping_proof_token }
  })

/**
 * The commits of an answer with every left-out `files` rebuilt from `lookup` (the answer's trees, checked): a commit
 * without files has no parent or its parent among `commits`. The reason when one cannot be rebuilt.
 */
export const rebuildFiles = (
  commits: ReadonlyArray<CompactCommitData>,
  lookup: (hash: string) => ReadonlyArray<TreeEntry> | undefined
): { readonly ok: true; readonly commits: Array<S.CommitData> } | { readonly ok: false; readonly reason: string } => {
  let manifests: Map<string, string> | undefined
  const out: Array<S.CommitData> = []
  for (const commit of commits) {
    if (commit.files !== undefined) {
      out.push(commit as S.CommitData)
      continue
    }
    manifests ??= new Map(commits.map((c) => [c.hash, c.manifest_hash]))
    const parent = commit.parent_hash == null ? null : manifests.get(commit.parent_hash)
    if (parent === undefined) return { ok: false, reason: `commit ${commit.hash} came without its files and without its parent` }
    const files = canonicalFiles(parent, commit.manifest_hash, lookup)
    if (files === undefined) return { ok: false, reason: `commit ${commit.hash} came without its files and without the trees that give them` }
    out.push({ ...commit, files })
  }
  return { ok: true, commits: out }
}
