/**
 * File paths as they appear in a commit's file changes: `/`-separated entry names, relative to
 * the repository root.
 */
import type { NameCheck } from "../Names.ts"
import { checkEntryName } from "./Tree.ts"

const ok: NameCheck = { ok: true }
const fail = (reason: string): NameCheck => ({ ok: false, reason })

/** Non-empty, relative, no empty segments (leading, trailing or doubled `/`), each segment a valid entry name. */
export const checkPath = (path: string): NameCheck => {
  if (path.length === 0) return fail("path must not be empty")
  if (path.startsWith("/")) return fail(`path '${path}' must be relative`)
  for (const segment of path.split("/")) {
    if (segment.length === 0) return fail(`path '${path}' must not contain empty segments`)
    const name = checkEntryName(segment)
    if (!name.ok) return fail(`path '${JSON.stringify(path)}': ${name.reason}`)
  }
  return ok
}

/** The files of one snapshot: each path valid, no duplicates, and no file that is also a directory of another (`a` and `a/b`). */
export const checkPathSet = (paths: Iterable<string>): NameCheck => {
  const all = new Set<string>()
  for (const path of paths) {
    const check = checkPath(path)
    if (!check.ok) return check
    if (all.has(path)) return fail(`duplicate path '${path}'`)
    all.add(path)
  }
  for (const path of all) {
    for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) {
      const dir = path.slice(0, i)
      if (all.has(dir)) return fail(`'${dir}' is both a file and a directory (of '${path}')`)
    }
  }
  return ok
}
