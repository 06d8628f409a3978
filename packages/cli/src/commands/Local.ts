/**
 * `grove commit`, `grove status`, `grove log` and `grove diff`: local
 * commands (diff asks the server only for base content it does not keep).
 */
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { commitWorkingTree } from "../local/Commit.ts"
import { workingChanges as changesOf } from "../local/LocalWork.ts"
import { io } from "../local/Io.ts"
import { blobPath, tempDir } from "../local/Objects.ts"
import { currentBranch } from "../local/State.ts"
import { statusReport } from "../local/StatusReport.ts"
import { openWorkspace, repositoryOf } from "../local/Workspace.ts"
import { CliEnv } from "../CliEnv.ts"
import { type DiffedFile, diffText, fileDiff, wantsColor } from "../DiffText.ts"
import { usage } from "../Failures.ts"
import { Output } from "../Output.ts"
import { fetchBlobBytes } from "../sync/Download.ts"
import { remoteOf } from "../sync/Session.ts"

export const commit = Effect.fn("Local.commit")(function*() {
  const out = yield* Output
  const { state, workspace } = yield* openWorkspace()
  const result = yield* commitWorkingTree(workspace, state)
  const branch = currentBranch(result.state)
  yield* out.result(
    {
      branch: branch.name,
      commit: result.commit?.hash ?? null,
      merge_parent: result.commit?.merge_parent_hash ?? null,
      changes: result.changes.map((c) => ({ path: c.path, change_type: c.change_type, ...(c.old_path == null ? {} : { old_path: c.old_path }) })),
      unpushed: branch.unpushed.length
    },
    () =>
      result.commit === undefined
        ? "Nothing to commit."
        : `Committed ${result.commit.hash.slice(0, 12)} on ${branch.name}: ${result.changes.length} file(s) changed (${branch.unpushed.length} unpushed).`
  )
})

/** The checkout's working-tree changes against the head (LocalWork.ts: shared with the commands that guard local work). */
const workingChanges = Effect.fn("Local.workingChanges")(function*() {
  const { state, workspace } = yield* openWorkspace()
  return { state, workspace, ...(yield* changesOf(workspace, state)) }
})

export const status = Effect.fn("Local.status")(function*() {
  const out = yield* Output
  const { branch, changes, scanned, state, workspace } = yield* workingChanges()
  const report = statusReport({
    repository: repositoryOf(workspace),
    remote: workspace.config.remote,
    branch,
    merge: state.merge?.branch === branch.name ? state.merge : undefined,
    changes,
    invalid: scanned.invalid
  })
  yield* out.result(report.value, report.human)
})

export const log = Effect.fn("Local.log")(function*(options: { readonly limit: number | undefined }) {
  const out = yield* Output
  if (options.limit !== undefined && options.limit < 1) return yield* usage(`--limit must be at least 1, got ${options.limit}`)
  const { state, workspace } = yield* openWorkspace()
  const branch = currentBranch(state)
  const unpushed = new Set(branch.unpushed)
  const entries: Array<Record<string, unknown>> = []
  // First-parent history from the head, as far as the checkout knows it.
  for (let hash = branch.head; hash !== null && hash !== undefined && (options.limit === undefined || entries.length < options.limit);) {
    const stored = yield* workspace.objects.readCommit(hash)
    if (stored === undefined) break
    const c = stored.commit
    entries.push({
      hash: c.hash,
      branch: c.branch_name,
      author: c.author,
      timestamp: c.timestamp,
      parent: c.parent_hash ?? null,
      merge_parent: c.merge_parent_hash ?? null,
      message: c.message ?? null,
      files: c.files.length,
      pushed: !unpushed.has(c.hash)
    })
    hash = c.parent_hash ?? null
  }
  yield* out.result({ branch: branch.name, commits: entries }, () =>
    entries.length === 0
      ? `No commits on ${branch.name} yet.`
      : entries.map((e) =>
        [
          `commit ${e["hash"]}${e["pushed"] ? "" : " (not pushed)"}`,
          ...(e["merge_parent"] === null ? [] : [`Merge:  ${String(e["merge_parent"]).slice(0, 12)}`]),
          `Branch: ${e["branch"]}`,
          `Author: ${e["author"]}`,
          `Date:   ${e["timestamp"]}`,
          ...(e["message"] === null ? [] : ["", `    ${e["message"]}`]),
          `Files:  ${e["files"]} changed`
        ].join("\n")
      ).join("\n\n"))
})

export const diff = Effect.fn("Local.diff")(function*(options: { readonly color: boolean }) {
  const out = yield* Output
  const { env } = yield* CliEnv
  const { changes, workspace } = yield* workingChanges()
  const root = workspace.root
  // Base content: the kept copy of an unpushed blob, else the server.
  const wanted = new Set<string>()
  for (const change of changes) if (change.old_blob_hash !== null && !(yield* workspace.objects.hasBlob(change.old_blob_hash))) wanted.add(change.old_blob_hash)
  const fetched = wanted.size === 0
    ? new Map<string, Uint8Array>()
    : yield* fetchBlobBytes(yield* remoteOf(workspace), [...wanted].map((hash) => ({ hash, size: 1 })), path.join(tempDir(root), `diff-${process.pid}`))
  const oldBytes = (hash: string) =>
    fetched.has(hash) ? Effect.succeed(fetched.get(hash)!) : io("cannot read a kept blob", () => fs.readFile(blobPath(root, hash)))
  const newBytes = (file: string) =>
    io(`cannot read ${file}`, async () => {
      const absolute = path.join(root, file)
      const stats = await fs.lstat(absolute)
      return stats.isSymbolicLink() ? new TextEncoder().encode(await fs.readlink(absolute)) : new Uint8Array(await fs.readFile(absolute))
    })
  const files: Array<DiffedFile> = []
  for (const change of changes) {
    const before = change.old_blob_hash === null ? new Uint8Array(0) : yield* oldBytes(change.old_blob_hash)
    const after = change.new_blob_hash === null ? new Uint8Array(0) : yield* newBytes(change.path)
    files.push(fileDiff(change, before, after))
  }
  // No change prints nothing, as `git diff` (a lone newline otherwise); `--json` still gives its document.
  if (files.length === 0 && !out.json) return
  yield* out.result({ files }, () => diffText(files, wantsColor(options.color, env)))
})
