/**
 * A commit's `files` list and its agreement with the parent's and its own manifests.
 *
 * Which hash fields each change type carries is *(inferred)* from the protocol notes (added: new
 * only, deleted: old only, modified and renamed: both, renamed: `old_path`); confirm against the
 * real client before relying on it.
 */
import type { NameCheck } from "../Names.ts"
import { checkHash } from "./Blake3.ts"
import type { Hash } from "./Blake3.ts"
import { checkPath } from "./Path.ts"
import { isBlobMode } from "./Tree.ts"
import type { BlobMode, TreeEntry } from "./Tree.ts"

export type ChangeType = "added" | "modified" | "deleted" | "renamed"

export interface FileChange {
  readonly path: string
  readonly change_type: ChangeType
  readonly old_blob_hash: Hash | null
  readonly new_blob_hash: Hash | null
  readonly old_path?: string | null | undefined
  readonly old_mode?: BlobMode | null | undefined
  readonly new_mode?: BlobMode | null | undefined
}

/** Every file of one snapshot, by full path. */
export type Snapshot = ReadonlyMap<string, { readonly hash: Hash; readonly mode: BlobMode }>

const ok: NameCheck = { ok: true }
const fail = (reason: string): { readonly ok: false; readonly reason: string } => ({ ok: false, reason })

const CHANGE_TYPES: ReadonlySet<unknown> = new Set(["added", "modified", "deleted", "renamed"])

/** The rules one change must follow on its own. */
export const checkFileChange = (change: FileChange): NameCheck => {
  const path = checkPath(change.path)
  if (!path.ok) return path
  if (!CHANGE_TYPES.has(change.change_type)) return fail(`unknown change_type for '${change.path}'`)
  const wantsOld = change.change_type !== "added"
  const wantsNew = change.change_type !== "deleted"
  if (wantsOld !== (change.old_blob_hash !== null)) {
    return fail(`'${change.path}' (${change.change_type}) must ${wantsOld ? "" : "not "}carry old_blob_hash`)
  }
  if (wantsNew !== (change.new_blob_hash !== null)) {
    return fail(`'${change.path}' (${change.change_type}) must ${wantsNew ? "" : "not "}carry new_blob_hash`)
  }
  for (const [field, value] of [["old_blob_hash", change.old_blob_hash], ["new_blob_hash", change.new_blob_hash]] as const) {
    if (value === null) continue
    const h = checkHash(value, `${field} of '${change.path}'`)
    if (!h.ok) return h
  }
  for (const [field, value] of [["old_mode", change.old_mode], ["new_mode", change.new_mode]] as const) {
    if (value != null && !isBlobMode(value)) return fail(`${field} of '${change.path}' must be 'regular', 'executable' or 'symlink'`)
  }
  if (change.change_type === "renamed") {
    if (change.old_path == null) return fail(`renamed '${change.path}' must carry old_path`)
    const old = checkPath(change.old_path)
    if (!old.ok) return old
    if (change.old_path === change.path) return fail(`renamed '${change.path}' must change its path`)
  }
  return ok
}

/** Every file under a root tree. `lookup` returns a stored or pushed tree's entries; a missing tree is an error. */
export const flattenTree = (
  root: Hash,
  lookup: (hash: Hash) => ReadonlyArray<TreeEntry> | undefined
): { readonly ok: true; readonly files: Snapshot } | { readonly ok: false; readonly reason: string } => {
  const files = new Map<string, { hash: Hash; mode: BlobMode }>()
  const pending: Array<readonly [prefix: string, hash: Hash]> = [["", root]]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [prefix, hash] = next
    const entries = lookup(hash)
    if (entries === undefined) return fail(`tree ${hash}${prefix === "" ? "" : ` (at '${prefix}')`} is missing`)
    for (const entry of entries) {
      const path = prefix === "" ? entry.name : `${prefix}/${entry.name}`
      if (entry.kind === "tree") pending.push([path, entry.hash])
      else if (isBlobMode(entry.mode)) files.set(path, { hash: entry.hash, mode: entry.mode })
    }
  }
  return { ok: true, files }
}

/**
 * The changes turn `before` (the parent's files; empty for a root commit) into exactly `after`
 * (the commit's own files): every old side matches `before`, nothing unlisted changed, and every
 * new side lands in `after`. Modes are compared wherever the change states them.
 */
export const checkFileChangesAgree = (files: ReadonlyArray<FileChange>, before: Snapshot, after: Snapshot): NameCheck => {
  const state = new Map(before)
  const removed = new Set<string>()
  // Removals first, against the parent, so the order of the list does not matter (a rename away from `a` and a new `a`).
  for (const change of files) {
    const check = checkFileChange(change)
    if (!check.ok) return check
    if (change.change_type === "added") continue
    const from = change.change_type === "renamed" ? change.old_path ?? change.path : change.path
    const old = before.get(from)
    if (old === undefined) return fail(`'${from}' (${change.change_type}) is not in the parent`)
    if (old.hash !== change.old_blob_hash) return fail(`old_blob_hash of '${from}' does not match the parent`)
    if (change.old_mode != null && change.old_mode !== old.mode) return fail(`old_mode of '${from}' does not match the parent`)
    if (removed.has(from)) return fail(`'${from}' is changed twice`)
    removed.add(from)
    state.delete(from)
  }
  for (const change of files) {
    if (change.change_type === "deleted") continue
    if (state.has(change.path)) return fail(`'${change.path}' (${change.change_type}) already exists`)
    const now = after.get(change.path)
    if (now === undefined || now.hash !== change.new_blob_hash) return fail(`new_blob_hash of '${change.path}' does not match the commit's manifest`)
    if (change.new_mode != null && change.new_mode !== now.mode) return fail(`new_mode of '${change.path}' does not match the commit's manifest`)
    state.set(change.path, now)
  }
  if (state.size !== after.size) return fail("the files list does not account for every added or deleted file")
  for (const [path, file] of after) {
    const got = state.get(path)
    if (got === undefined) return fail(`'${path}' is in the manifest but not accounted for`)
    if (got.hash !== file.hash || got.mode !== file.mode) return fail(`'${path}' changed but is not in the files list`)
  }
  return ok
}
