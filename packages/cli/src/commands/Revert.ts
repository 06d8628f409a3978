/**
 * `grove revert <hash>`: asks the server to land, on the commit's branch, a
 * commit that undoes it (`POST .../commits/{hash}/revert`; on main it undoes a
 * squash). When that branch is the checkout's, the checkout then pulls it.
 */
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import type { CliFailure } from "../Failures.ts"
import { CliFailure as Failure, ExitCode, failure, usage } from "../Failures.ts"
import { io } from "../local/Io.ts"
import { commitsDir } from "../local/Objects.ts"
import { currentBranch } from "../local/State.ts"
import type { Workspace } from "../local/Workspace.ts"
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

const HASH_PREFIX = /^[0-9a-f]{7,64}$/

/**
 * The full hash of the commit `given` names: the hash itself, or a unique prefix of 7 or more hex
 * characters among the commits this checkout holds (as git resolves abbreviated hashes).
 */
const checkPrefix = (given: string) => {
  const prefix = given.trim().toLowerCase()
  return HASH_PREFIX.test(prefix)
    ? Effect.succeed(prefix)
    : Effect.fail(usage(
      `'${given.slice(0, 100)}' is not a commit hash: give the hash grove log shows, or a unique prefix of 7 or more of its hex characters`
    ))
}

export const resolveCommit = Effect.fn("Revert.resolveCommit")(function*(workspace: Workspace, given: string) {
  const prefix = yield* checkPrefix(given)
  if (prefix.length === 64) return prefix
  const names = yield* io("cannot read the checkout's commits", () => fs.readdir(commitsDir(workspace.root)).catch((): Array<string> => []))
  const matches = names.filter((n) => n.endsWith(".json") && n.startsWith(prefix)).map((n) => n.slice(0, -".json".length))
  if (matches.length === 1) return matches[0]!
  if (matches.length === 0) {
    return yield* usage(`no commit in this checkout starts with ${prefix}: run grove pull, or give the full hash`)
  }
  return yield* usage(
    `${prefix} is ambiguous: ${matches.length} commits start with it (${matches.slice(0, 5).map((m) => m.slice(0, 12)).join(", ")}${matches.length > 5 ? ", ..." : ""}); give more characters`
  )
})

export const revert = Effect.fn("Revert.run")(function*(options: { readonly hash: string }) {
  const out = yield* Output
  yield* checkPrefix(options.hash) // bad input is a usage error (2) wherever grove runs
  const opened = yield* openWorkspace()
  const hash = yield* resolveCommit(opened.workspace, options.hash)
  const remote = yield* remoteOf(opened.workspace)
  const { call, client } = remote.connection
  const result = yield* landing(call(client.merges.revert({
    params: { owner: remote.owner, name: remote.name, hash }
  }))).pipe(Effect.mapError((error) => explain(hash, error)))
  yield* out.result(
    result,
    () => `Reverted ${result.reverted_hash.slice(0, 12)} on ${result.branch}: ${result.commit_hash.slice(0, 12)} ${result.message}`
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
