/**
 * The pin a clone's preflight hands to its pull: the scope it proved (depth, branch, paths,
 * selected branch and its expected head) and the branch heads it saw (their digest, and the
 * history head). Hex of JSON, as the Oak client carries it opaquely; the pull recomputes the same
 * capture and answers 412 when anything moved. Not a secret and not a grant: it only narrows.
 */
import { ApiErrors } from "@grove/api"
import * as Blake3 from "@grove/core/objects/Blake3"
import { Effect } from "effect"

export interface SelectedBranch {
  readonly name: string
  readonly head: string
  readonly status: string
}

export interface Capture {
  readonly roots: ReadonlyArray<string>
  readonly head: string | null
  readonly selected: SelectedBranch | undefined
}

export interface SnapshotScope {
  readonly depth: number | null
  readonly branch: string | null
  readonly paths: string | null
  readonly selectedBranch: string | null
  readonly expectedHead: string | null
}

interface Snapshot extends SnapshotScope {
  readonly roots: string
  readonly head: string | null
  readonly selected: SelectedBranch | null
}

const MAX_TOKEN = 64 * 1024

/**
 * The branch heads a scope depends on, from the repository's branch rows: every head (or only the history head's,
 * for `depth`), and the selected branch's record, in the states the Oak client knows (merged reads closed).
 */
export const captureOf = (
  rows: ReadonlyArray<{ readonly name: string; readonly head: string | null; readonly status: string }>,
  depth: number | null,
  branch: string | null,
  selectedBranch: string | null
): Capture => {
  const head = rows.find((b) => b.name === (branch ?? "main"))?.head ?? null
  const selected = selectedBranch === null ? undefined : rows.find((b) => b.name === selectedBranch && b.head !== null)
  return {
    roots: depth !== null ? (head === null ? [] : [head]) : [...new Set(rows.flatMap((b) => b.head === null ? [] : [b.head]))].sort(),
    head,
    selected: selected === undefined ? undefined : { name: selected.name, head: selected.head!, status: selected.status === "open" ? "open" : "closed" }
  }
}

const rootsDigest = (roots: ReadonlyArray<string>) => Blake3.hash(roots.join("\n"))

export const encodeSnapshot = (scope: SnapshotScope, capture: Capture): string => {
  const snapshot: Snapshot = { ...scope, roots: rootsDigest(capture.roots), head: capture.head, selected: capture.selected ?? null }
  return Buffer.from(JSON.stringify(snapshot)).toString("hex")
}

/** Why a pull's snapshot does not hold now; undefined when it does. "invalid" for a token that is not one. */
export const snapshotProblem = (token: string, scope: SnapshotScope, capture: Capture): string | undefined => {
  if (token.length > MAX_TOKEN || !/^(?:[0-9a-f]{2})+$/.test(token)) return "invalid"
  let snapshot: Snapshot
  try {
    snapshot = JSON.parse(Buffer.from(token, "hex").toString("utf8")) as Snapshot
  } catch {
    return "invalid"
  }
  if (typeof snapshot !== "object" || snapshot === null) return "invalid"
  if (
    snapshot.depth !== scope.depth || snapshot.branch !== scope.branch || snapshot.paths !== scope.paths ||
    snapshot.selectedBranch !== scope.selectedBranch || snapshot.expectedHead !== scope.expectedHead
  ) {
    return "integrity snapshot scope does not match pull request; rerun clone preflight"
  }
  const selected = capture.selected ?? null
  if (
    snapshot.roots !== rootsDigest(capture.roots) || snapshot.head !== capture.head ||
    JSON.stringify(snapshot.selected) !== JSON.stringify(selected)
  ) {
    return "repository branch roots changed after integrity preflight; rerun clone preflight"
  }
  return undefined
}

/** A selected branch must exist, be open and sit at the expected head (412 otherwise, as a clone's precondition). */
export const checkSelected = (requested: string | null, expectedHead: string | null, selected: SelectedBranch | undefined) => {
  if (requested === null) return Effect.void
  const failed = (error: string) => Effect.fail(new ApiErrors.PreconditionFailed({ error, code: "selected_branch_changed" }))
  if (selected === undefined) return failed(`selected branch '${requested}' is missing or has no published head`)
  if (selected.status !== "open") return failed(`selected branch '${requested}' is not open`)
  if (expectedHead !== null && expectedHead !== selected.head) return failed(`selected branch '${requested}' does not match expected_head`)
  return Effect.void
}
