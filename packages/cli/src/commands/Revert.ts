/**
 * `grove revert <hash>`: asks the server to land, on the commit's branch, a
 * commit that undoes it (`POST .../commits/{hash}/revert`; on main it undoes a
 * squash). When that branch is the checkout's, the checkout then pulls it.
 */
import { Objects } from "@grove/core"
import { Effect } from "effect"
import type { CliFailure } from "../Failures.ts"
import { CliFailure as Failure, ExitCode, failure, usage } from "../Failures.ts"
import { currentBranch } from "../local/State.ts"
import { openWorkspace } from "../local/Workspace.ts"
import { Output } from "../Output.ts"
import { conflictPaths, landing, pathList, statusOf } from "../sync/Land.ts"
import { remoteOf } from "../sync/Session.ts"
import { pullCheckout } from "./Pull.ts"

const explain = (hash: string, error: CliFailure): CliFailure => {
  const paths = conflictPaths(error)
  if (statusOf(error) === 409 && paths.length > 0) {
    return new Failure({
      message: `cannot revert ${hash.slice(0, 12)}: ${paths.length} file(s) it touched changed since:\n${pathList(paths)}\n` +
        "Undo the change by hand on a branch (edit, grove push, grove merge).",
      exitCode: ExitCode.conflict,
      code: error.code,
      details: error.details
    })
  }
  if (statusOf(error) === 404) return failure(`${error.message} (give the full commit hash, as grove log shows it)`, error.code, error.details)
  return error
}

export const revert = Effect.fn("Revert.run")(function*(options: { readonly hash: string }) {
  const out = yield* Output
  // The API takes full hashes only (a path parameter of any other shape is refused before it is sent).
  if (!Objects.Blake3.checkHash(options.hash).ok) {
    return yield* usage(`'${options.hash.slice(0, 100)}' is not a commit hash: give the full hash (64 hex characters), as grove log shows it`)
  }
  const opened = yield* openWorkspace()
  const remote = yield* remoteOf(opened.workspace)
  const { call, client } = remote.connection
  const result = yield* landing(call(client.merges.revert({
    params: { owner: remote.owner, name: remote.name, hash: options.hash }
  }))).pipe(Effect.mapError((error) => explain(options.hash, error)))
  yield* out.result(
    result,
    () => `Reverted ${result.reverted_hash.slice(0, 12)} on ${result.branch}: ${result.commit_hash.slice(0, 12)} ${JSON.stringify(result.message)}`
  )
  const current = currentBranch(opened.state)
  if (result.branch === current.name) {
    // The revert is on this branch: bring it into the checkout. It has landed whatever the pull does.
    yield* pullCheckout(opened).pipe(
      Effect.matchEffect({
        onSuccess: ({ events }) => out.note(events.length === 0 ? "Checkout up to date." : `Pulled: ${events.join("; ")}.`),
        onFailure: (error) => out.note(`The revert landed, but pulling it failed: ${error.message}. Run grove pull.`)
      })
    )
  } else if (result.branch === current.parent_branch) {
    yield* out.note(`${result.branch} changed: run grove pull to merge it into ${current.name}.`)
  }
})
