/**
 * The content commands that take no argument (`commit`, `push`, `pull`, `status`), run without the command
 * tree when the invocation is exactly the command's word, with or without `--json`: building effect/cli's
 * tree of every command's flags and parsing with it is ~10% of a one-file push's CPU, for nothing to
 * parse. Anything else (another flag, `--help`, a typo) goes through the tree (Cli.ts), which uses these
 * same bodies, so both ways run the same command. `clone` too, in its plain forms (`directClone`): the tree's
 * ~30 ms of CPU came before its pull was sent.
 */
import { Effect, Option } from "effect"
import { CliEnv } from "./CliEnv.ts"
import type { CommandBody, CommandServices } from "./CommandRun.ts"
import { load, runBody, withExitCode } from "./CommandRun.ts"
import type { CloneArgs } from "./EarlyPull.ts"
import { cloneArgs, takeEarlyPull } from "./EarlyPull.ts"
import type { ExitCode } from "./Failures.ts"
import type { Output } from "./Output.ts"

const localModule = () => load(() => import("./commands/Local.ts"))

export interface CloneInput {
  readonly repo: string
  readonly dest: Option.Option<string>
  readonly branch: Option.Option<string>
}

/**
 * `grove clone`'s body (Cli.ts gives it its arguments and flags): its pull is sent before the clone's modules load
 * (sync/PullAhead.ts).
 */
export const cloneBody = (input: CloneInput, plain?: CloneArgs): CommandBody => (remote) =>
  Effect.gen(function*() {
    // A plain clone's pull may be out already, sent before Effect loaded (main.ts, EarlyPull.ts).
    const { cwd } = yield* CliEnv
    const early = plain === undefined ? undefined : takeEarlyPull(remote, plain, cwd)
    const { pullAhead } = yield* load(() => import("./sync/PullAhead.ts"))
    const ahead = early ?? (yield* pullAhead(remote, input))
    const m = yield* load(() => import("./commands/Init.ts"))
    return yield* m.clone(remote, input, ahead)
  })

/** The bodies, by command word (Cli.ts gives each its description). */
export const plainCommands = {
  commit: () => Effect.flatMap(localModule(), (m) => m.commit()),
  push: () => Effect.flatMap(load(() => import("./commands/Push.ts")), (m) => m.push()),
  pull: () => Effect.flatMap(load(() => import("./commands/Pull.ts")), (m) => m.pull()),
  status: () => Effect.flatMap(localModule(), (m) => m.status())
} satisfies Record<string, CommandBody>

/**
 * The run of `argv` when it is one of `plainCommands`' words alone or with `--json` (before or after it), or a plain
 * clone (`directClone`); undefined otherwise.
 */
export const direct = (argv: ReadonlyArray<string>): Effect.Effect<ExitCode, never, Exclude<CommandServices, Output>> | undefined => {
  const words = argv.filter((a) => a !== "--json")
  const command = words.length === 1 && argv.length - words.length <= 1 && Object.hasOwn(plainCommands, words[0]!)
    ? plainCommands[words[0] as keyof typeof plainCommands]
    : undefined
  if (command === undefined) return directClone(argv)
  return withExitCode(runBody(argv.includes("--json"), undefined, command), (reported) => reported.exitCode)
}

/**
 * The run of `argv` when it is a plain clone (EarlyPull.cloneArgs: `clone OWNER/NAME [DEST]` with at most one each of
 * `--branch`, `--remote` and `--json`); undefined for anything else, which the tree parses.
 */
export const directClone = (argv: ReadonlyArray<string>): Effect.Effect<ExitCode, never, Exclude<CommandServices, Output>> | undefined => {
  const args = cloneArgs(argv)
  if (args === undefined) return undefined
  const input: CloneInput = { repo: args.repo, dest: Option.fromUndefinedOr(args.dest), branch: Option.fromUndefinedOr(args.branch) }
  return withExitCode(runBody(args.json, args.remote, cloneBody(input, args)), (reported) => reported.exitCode)
}
