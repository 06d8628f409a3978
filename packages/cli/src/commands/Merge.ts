/**
 * `grove merge [BRANCH] [--force] [--wait[=MINUTES]]`: pushes the current
 * branch when it has anything unpublished, asks the server to squash-merge the
 * branch onto main (`POST .../branches/{b}/merge`), and then moves the checkout
 * to a fresh personal branch from the new main, as the Oak client does, so the
 * next edit never lands on a merged (closed) branch.
 */
import { Duration, Effect, Option } from "effect"
import type { CliFailure } from "../Failures.ts"
import { CliFailure as Failure, ExitCode, failure, usage } from "../Failures.ts"
import { currentBranch, withBranch } from "../local/State.ts"
import { openWorkspace, saveState } from "../local/Workspace.ts"
import { Output } from "../Output.ts"
import { conflictPaths, landing, pathList, statusOf } from "../sync/Land.ts"
import type { RemoteRepo } from "../sync/RemoteRepo.ts"
import { remoteOf } from "../sync/Session.ts"
import { checkName, switchCheckout } from "./Branch.ts"
import { nothingToPush, publish } from "./Push.ts"

export interface MergeOptions {
  readonly branch: Option.Option<string>
  readonly force: boolean
  /** Minutes to keep retrying while CI holds the merge back (412). */
  readonly wait: Option.Option<number>
}

/** Seconds between merge attempts while `--wait` waits for CI (GROVE_MERGE_POLL_SECONDS overrides, for tests). */
const pollInterval = (): Duration.Duration => {
  const seconds = Number(process.env["GROVE_MERGE_POLL_SECONDS"])
  return Duration.seconds(Number.isFinite(seconds) && seconds > 0 ? seconds : 5)
}

const ciState = (error: CliFailure) => error.code === "ci_failing" ? "failing" : error.code === "ci_running" ? "still running" : "not passing"

/** The server's refusal, reworded with what happened and the command to run next. */
export const explain = (branch: string, error: CliFailure, waited: boolean): CliFailure => {
  const status = statusOf(error)
  const details = error.details
  if (status === 409) {
    const paths = conflictPaths(error)
    if (paths.length > 0) {
      return new Failure({
        message: `${branch} conflicts with main in ${paths.length} file(s):\n${pathList(paths)}\n` +
          "Run grove pull to merge main into your branch, resolve the conflicts, grove push, then grove merge.",
        exitCode: ExitCode.conflict,
        code: error.code,
        details
      })
    }
    if (error.details?.["retryable"] === true) {
      return failure(`main or ${branch} kept moving while merging (${error.message}); nothing was merged: run grove merge again`, error.code, details)
    }
  }
  if (status === 412) {
    return failure(
      waited
        ? `CI on ${branch} is ${ciState(error)} and the wait ran out; nothing was merged. Run grove merge --wait again, or grove merge --force to merge anyway`
        : `CI on ${branch} is ${ciState(error)}, so the merge was held back (${error.message}). Run grove merge --wait to merge once CI passes, or grove merge --force to merge anyway`,
      error.code,
      details
    )
  }
  if (status === 400) {
    if (error.code === "already_merged") {
      return failure(`${branch} is already merged into main. Start new work with grove switch -c`, error.code, details)
    }
    if (error.code === "branch_closed") {
      return failure(`${branch} is closed, so it cannot be merged. Start new work with grove switch -c`, error.code, details)
    }
    if (error.code === "no_changes" || error.code === "empty_branch") {
      return failure(`${branch} has nothing to merge: it makes no change to main (${error.message})`, error.code, details)
    }
  }
  if (status === 404) return failure(`${error.message} (is ${branch} pushed? grove push publishes it)`, error.code, details)
  return error
}

/**
 * The merge request until it lands: "moved" answers are retried at once (`landing`); a 412 from the
 * CI gate is retried every `interval` while `wait` lasts (`onWait` runs before the first pause).
 * Every refusal comes back reworded by `explain`.
 */
export const landMerge = <A, R>(
  branch: string,
  request: Effect.Effect<A, CliFailure, R>,
  options: { readonly wait: Option.Option<Duration.Duration>; readonly interval: Duration.Duration; readonly onWait: (error: CliFailure) => Effect.Effect<void> }
): Effect.Effect<A, CliFailure, R> =>
  Effect.gen(function*() {
    const deadline = Option.map(options.wait, (wait) => Date.now() + Duration.toMillis(wait))
    let waiting = false
    while (true) {
      const answer = yield* Effect.result(landing(request))
      if (answer._tag === "Success") return answer.success
      const error = answer.failure
      if (statusOf(error) !== 412 || Option.isNone(deadline)) return yield* explain(branch, error, false)
      if (Date.now() + Duration.toMillis(options.interval) > deadline.value) return yield* explain(branch, error, true)
      if (!waiting) {
        waiting = true
        yield* options.onWait(error)
      }
      yield* Effect.sleep(options.interval)
    }
  })

/**
 * A merge refused for the caller's role names the role and, when the caller may read the owning
 * organization's members, who has it: "needs the 'admin' role in acme: ask an owner or admin of acme: ann, bo".
 */
export const whoCanMerge = (remote: RemoteRepo, error: CliFailure): Effect.Effect<CliFailure> =>
  Effect.gen(function*() {
    const role = /needs the '(\w+)' role/.exec(error.message)?.[1]
    if (statusOf(error) !== 403 || role === undefined) return error
    const { call, client } = remote.connection
    const listed = yield* Effect.option(call(client.orgs.members({ params: { slug: remote.owner }, query: {} })))
    const able = role === "owner" ? ["owner"] : ["owner", "admin"]
    const names = Option.match(listed, { onNone: () => [], onSome: (l) => l.members.filter((m) => able.includes(m.role)).map((m) => m.username) })
    const shown = names.length > 8 ? [...names.slice(0, 8), "…"] : names
    const ask = shown.length === 0 ? "" : `: ask ${role === "owner" ? "an owner" : "an owner or admin"} of ${remote.owner}: ${shown.join(", ")}`
    return failure(`merging into main needs the '${role}' role in ${remote.owner}${ask}`, error.code, error.details)
  })

export const merge = Effect.fn("Merge.run")(function*(options: MergeOptions) {
  const out = yield* Output
  if (Option.isSome(options.branch)) yield* checkName(options.branch.value)
  let opened = yield* openWorkspace()
  const current = currentBranch(opened.state)
  const name = Option.getOrElse(options.branch, () => current.name)
  if (name === "main") return yield* usage("main is what branches merge into: give the branch to merge (grove merge BRANCH)")
  const onCurrent = name === current.name

  // The server merges what it has: publish the current branch first.
  if (onCurrent) {
    // Commits an edited tree too; with nothing new it sends no request.
    const pushed = yield* publish(opened.workspace, opened.state)
    if (pushed.pushed > 0) yield* out.note(`Pushed ${pushed.pushed} commit(s) to ${name}.`)
    // The first push can write the repository's owner and name into the config.
    opened = yield* openWorkspace()
  } else {
    const local = opened.state.branches[name]
    if (local !== undefined && !nothingToPush(local)) {
      yield* out.note(`${name} has local commits or a description not pushed yet; merging what the server has (grove switch ${name} && grove push to publish them)`)
    }
  }

  const remote = yield* remoteOf(opened.workspace)
  const { call, client } = remote.connection
  const request = call(client.merges.merge({
    params: { owner: remote.owner, name: remote.name, branch: name },
    query: options.force ? { force: "1" } : {}
  }))
  const wait = Option.map(options.wait, (minutes) => Duration.minutes(Math.max(0, minutes)))
  const interval = pollInterval()
  const result = yield* landMerge(name, request, {
    wait,
    interval,
    onWait: (error) =>
      out.note(`CI on ${name} is ${ciState(error)}; waiting until it passes (up to ${Duration.format(Option.getOrThrow(wait))}, retrying every ${Duration.format(interval)})...`)
  }).pipe(Effect.catchTag("CliFailure", (error) => Effect.flatMap(whoCanMerge(remote, error), Effect.fail)))

  yield* out.result(
    result,
    () => `Merged ${name} into main: ${result.commit_hash.slice(0, 12)} ${JSON.stringify(result.message)}`
  )

  // The merged branch is closed on the server; keep working on a new branch from the new main.
  let state = opened.state
  const merged = state.branches[name]
  if (merged !== undefined) {
    state = withBranch(state, { ...merged, status: "merged" })
    yield* saveState(opened.workspace, state)
  }
  if (!onCurrent) return
  yield* switchCheckout(opened.workspace, state, { name: Option.none(), create: true }).pipe(
    Effect.matchEffect({
      onSuccess: ({ target }) => out.note(`Now on ${target.name}, a new branch from main (${target.head?.slice(0, 12) ?? "empty"}).`),
      onFailure: (error) =>
        out.note(`The merge landed, but moving to a new branch failed (${error.message}). Run grove switch -c to keep working.`)
    })
  )
})
