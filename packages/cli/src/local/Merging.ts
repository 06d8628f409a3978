/**
 * A three-way merge of snapshots as the client does it on pull: paths merge
 * with `mergeSnapshots`; a file both sides edited is merged line by line
 * (`mergeText`, diff3 markers); binary files, symlinks and delete/modify
 * clashes keep our version and are reported as conflicts.
 */
import { Merge } from "@grove/core"
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { CliFailure } from "../Failures.ts"
import { io } from "./Io.ts"
import { commitsDir } from "./Objects.ts"
import type { StoredCommit } from "./Objects.ts"
import type { Snapshot } from "./WorkingTree.ts"

type Hash = string

export interface MergeConflict {
  readonly path: string
  readonly kind: string
}

export interface MergePlan {
  /** What the working tree should hold (ours at conflicting paths)... */
  readonly target: Snapshot
  /** ...then these files overwritten: text merges, clean or with conflict markers. */
  readonly writes: ReadonlyMap<string, string>
  readonly conflicts: ReadonlyArray<MergeConflict>
}

const TEXT_KINDS: ReadonlySet<string> = new Set(["content", "add_add"])

const isText = (mode: string | undefined) => mode === "regular" || mode === "executable"

/** The blobs whose bytes a text merge of `result`'s conflicts needs. */
export const blobsForTextMerge = (
  conflicts: ReadonlyArray<MergeConflict>,
  base: Snapshot,
  ours: Snapshot,
  theirs: Snapshot
): Array<Hash> => {
  const out = new Set<Hash>()
  for (const conflict of conflicts) {
    const o = ours.get(conflict.path)
    const t = theirs.get(conflict.path)
    if (!TEXT_KINDS.has(conflict.kind) || !isText(o?.mode) || !isText(t?.mode)) continue
    const b = base.get(conflict.path)
    for (const file of [b, o, t]) if (file !== undefined) out.add(file.hash)
  }
  return [...out]
}

const decoder = new TextDecoder("utf-8", { fatal: true })
const asText = (bytes: Uint8Array | undefined): string | undefined => {
  if (bytes === undefined || Merge.TextMerge.isBinary(bytes)) return undefined
  try {
    return decoder.decode(bytes)
  } catch {
    return undefined
  }
}

/** Plans the merge; `bytesOf` must answer every hash `blobsForTextMerge` listed. */
export const planMerge = (
  base: Snapshot,
  ours: Snapshot,
  theirs: Snapshot,
  bytesOf: (hash: Hash) => Uint8Array | undefined,
  labels: { readonly ours: string; readonly theirs: string }
): MergePlan => {
  const result = Merge.ThreeWay.mergeSnapshots(base, ours, theirs)
  const target = new Map(result.merged)
  const writes = new Map<string, string>()
  const conflicts: Array<MergeConflict> = []
  for (const conflict of result.conflicts) {
    const o = ours.get(conflict.path)
    const t = theirs.get(conflict.path)
    if (!TEXT_KINDS.has(conflict.kind) || o === undefined || t === undefined || !isText(o.mode) || !isText(t.mode)) {
      conflicts.push(conflict)
      continue
    }
    const b = base.get(conflict.path)
    const baseText = b === undefined ? "" : asText(bytesOf(b.hash))
    const oursText = asText(bytesOf(o.hash))
    const theirsText = asText(bytesOf(t.hash))
    if (baseText === undefined || oursText === undefined || theirsText === undefined) {
      conflicts.push({ path: conflict.path, kind: "binary" })
      continue
    }
    const merged = Merge.TextMerge.mergeText(baseText, oursText, theirsText, labels)
    // The mode follows the side that changed it.
    const mode = b !== undefined && o.mode === b.mode ? t.mode : o.mode
    target.set(conflict.path, { hash: o.hash, mode })
    writes.set(conflict.path, merged.text)
    if (merged.conflicts > 0) conflicts.push(conflict)
  }
  return { target, writes, conflicts }
}

/** Parents of every commit the checkout knows, for merge bases and ancestry. */
export const loadParents = (root: string): Effect.Effect<Merge.MergeBase.Parents, CliFailure> =>
  io("cannot read the local commits", async () => {
    const dir = commitsDir(root)
    const names = await fs.readdir(dir).catch((): Array<string> => [])
    const parents = new Map<Hash, Array<Hash>>()
    await Promise.all(names.filter((n) => n.endsWith(".json")).map(async (name) => {
      const stored = JSON.parse(await fs.readFile(path.join(dir, name), "utf8")) as StoredCommit
      const c = stored.commit
      parents.set(c.hash, [c.parent_hash, c.merge_parent_hash].filter((h): h is string => typeof h === "string"))
    }))
    return (hash: Hash) => parents.get(hash)
  })
