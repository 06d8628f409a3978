/**
 * The changes a quick `grove status` lists (NoopPush.ts) when a complete stat pass (TreeStatus.columnsChanged) found
 * only files of the index changed, every directory as recorded (so no name was added or removed) and the index holds
 * the head: each such file is hashed and compared with its entry, as the full command's scan does
 * (WorkingTree.hashEdits, then LocalWork.workingChanges) but synchronously and without Effect. Undefined at any doubt
 * (a file gone or no longer a file, a large file, a changed file whose bytes are the same): the full command decides.
 */
import { diffSnapshots } from "@grove/core/merge/TreeDiff"
import { hash } from "@grove/core/objects/Blake3Backend"
import type { FileChange } from "@grove/core/objects/FileChanges"
import * as fs from "node:fs"
import type { BlobMode, WorkIndex } from "./IndexFile.ts"
import type { ColumnsChanged } from "./TreeStatus.ts"
import { changedFiles, modeOf } from "./TreeStatus.ts"

/** Larger files are left to the full command, which streams them (Hashing.ts). */
const WHOLE_FILE_LIMIT = 8 * 1024 * 1024

type File = { readonly hash: string; readonly mode: BlobMode }

export const editedFiles = (root: string, index: WorkIndex, found: ColumnsChanged): ReadonlyArray<FileChange> | undefined => {
  const changed = changedFiles(root, index, found)
  if (changed === undefined || changed.some(({ stats }) => stats.size > WHOLE_FILE_LIMIT)) return undefined
  const before = new Map<string, File>()
  const after = new Map<string, File>()
  for (const { absolute, before: known, path: file, stats, symlink } of changed) {
    before.set(file, { hash: known.hash, mode: known.mode })
    after.set(file, { hash: hash(symlink ? fs.readlinkSync(absolute) : fs.readFileSync(absolute)), mode: modeOf(stats, symlink) })
  }
  const changes = diffSnapshots(before, after)
  // Only stats changed (a touch, a racy entry): the full command records them in the index.
  return changes.length === 0 ? undefined : changes
}
