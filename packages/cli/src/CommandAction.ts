/**
 * The global flags (`--json`, `--remote`) of the command tree, and `action`: a command body run with
 * them (CommandRun.ts).
 */
import { Effect, Option } from "effect"
import { Flag, GlobalFlag } from "effect/cli"
import type { CommandBody } from "./CommandRun.ts"
import { runBody } from "./CommandRun.ts"
import { DEFAULT_REMOTE } from "./Remote.ts"

/**
 * An on/off flag that never takes the next word as its value. effect/cli's Flag.Boolean reads a following
 * `1`, `yes` or `off` as its value, so `grove ci logs -f 1` lost its run id; `--flag=false` still works.
 */
export const Switch = (name: string) => Flag.Boolean(name).pipe(Flag.withOptionalValue("true"), Flag.withDefault(false))

export const JsonFlag = GlobalFlag.Setting("json")({
  flag: Switch("json").pipe(
    Flag.withDescription("Print exactly one JSON document on stdout: the result, or { error, code } on failure")
  )
})

export const RemoteFlag = GlobalFlag.Setting("remote")({
  flag: Flag.String("remote").pipe(
    Flag.withMetavar("URL"),
    // A checkout's commands connect to its config.json's remote (Session.remoteOf), never to this.
    Flag.withDescription(
      `The server (default: $GROVE_REMOTE, else the checkout's, else the last one logged in to, else ${DEFAULT_REMOTE}); ` +
        "not for a checkout's own repository: push, pull, merge and the other commands on it (without --repo) always talk to the checkout's server"
    ),
    Flag.optional
  )
})

export { load, Reported } from "./CommandRun.ts"
export type { CommandServices } from "./CommandRun.ts"

/** Runs a command body with the chosen server and `Output`, printing its failure. */
export const action = (body: CommandBody) =>
  Effect.gen(function*() {
    const remote = Option.getOrUndefined(yield* RemoteFlag)
    yield* runBody(yield* JsonFlag, remote, body)
  })
