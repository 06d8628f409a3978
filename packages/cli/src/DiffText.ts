/**
 * The text of `grove diff`: one file's unified diff (or the binary note and a mode change), and its
 * colours on a terminal. Shared by the working-tree diff and the branch diff.
 */
import { Merge } from "@grove/core"

export interface DiffedFile {
  readonly path: string
  readonly change_type: string
  readonly old_path?: string
  readonly binary: boolean
  readonly diff: string
}

const decoder = new TextDecoder()

/** One changed file between `before` and `after` (empty bytes for a side that does not exist). */
export const fileDiff = (
  change: { readonly path: string; readonly change_type: string; readonly old_path?: string | null | undefined; readonly old_mode?: string | null | undefined; readonly new_mode?: string | null | undefined },
  before: Uint8Array,
  after: Uint8Array
): DiffedFile => {
  const oldPath = change.old_path ?? change.path
  const binary = Merge.TextMerge.isBinary(before) || Merge.TextMerge.isBinary(after)
  const modeNote = change.old_mode != null && change.new_mode != null && change.old_mode !== change.new_mode
    ? `mode ${change.old_mode} -> ${change.new_mode}\n`
    : ""
  const text = binary
    ? `Binary files a/${oldPath} and b/${change.path} differ\n`
    : Merge.TextMerge.unifiedDiff(decoder.decode(before), decoder.decode(after), {
      oldLabel: change.change_type === "added" ? "/dev/null" : `a/${oldPath}`,
      newLabel: change.change_type === "deleted" ? "/dev/null" : `b/${change.path}`
    })
  return {
    path: change.path,
    change_type: change.change_type,
    ...(change.old_path == null ? {} : { old_path: change.old_path }),
    binary,
    diff: `${modeNote}${text}`
  }
}

/** Colour for a person at a terminal only: not with --no-color, NO_COLOR, or output to a pipe or file. */
export const wantsColor = (flag: boolean, env: Readonly<Record<string, string | undefined>>) =>
  flag && (env["NO_COLOR"] ?? "") === "" && process.stdout.isTTY === true

/** The diff text, coloured as git does by default when `color`. */
export const diffText = (files: ReadonlyArray<DiffedFile>, color: boolean): string => {
  const text = files.map((f) => `diff ${f.old_path === undefined ? "" : `${f.old_path} -> `}${f.path} (${f.change_type})\n${f.diff}`).join("").replace(/\n$/, "")
  if (!color) return text
  return text.split("\n").map((line) =>
    line.startsWith("diff ") || line.startsWith("+++ ") || line.startsWith("--- ")
      ? `\x1b[1m${line}\x1b[0m`
      : line.startsWith("@@")
      ? `\x1b[36m${line}\x1b[0m`
      : line.startsWith("+")
      ? `\x1b[32m${line}\x1b[0m`
      : line.startsWith("-")
      ? `\x1b[31m${line}\x1b[0m`
      : line
  ).join("\n")
}
