/**
 * The content commands that take no argument (`commit`, `push`, `pull`, `status`), run without the command
 * tree when the invocation is exactly the command's word, with or without `--json`: building effect/cli's
 * tree of every command's flags and parsing with it is ~10% of a one-file push's CPU, for nothing to
 * parse. Anything else (another flag, `--help`, a typo) goes through the tree (Cli.ts), which uses these
 * same bodies, so both ways run the same command. `clone` too, in its plain forms (`directClone`): the tree's
 * ~30 ms of CPU came before its pull was sent.
 */
import { Effect, Option } from "effect"
import type { CommandBody, CommandServices } from "./CommandRun.ts"
import { load, runBody, withExitCode } from "./CommandRun.ts"
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
export const cloneBody = (input: CloneInput): CommandBody => (remote) =>
  Effect.gen(function*() {
    const { pullAhead } = yield* load(() => import("./sync/PullAhead.ts"))
    const ahead = yield* pullAhead(remote, input)
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

/** A flag's value as `--name value` or `--name=value` at `i`: [value, words taken], or undefined when it is not that flag. */
const flagValue = (argv: ReadonlyArray<string>, i: number, name: string): [string | undefined, number] | undefined => {
  const arg = argv[i]!
  if (arg === `--${name}`) {
    const next = argv[i + 1]
    return [next === undefined || next === "" || next.startsWith("-") ? undefined : next, 2]
  }
  if (arg.startsWith(`--${name}=`)) {
    const value = arg.slice(name.length + 3)
    return [value === "" ? undefined : value, 1]
  }
  return undefined
}

/**
 * The run of `argv` when it is `clone OWNER/NAME [DEST]` with at most one each of `--branch B`, `--remote URL` (also
 * as `--x=value`) and `--json`, the global flags anywhere and `--branch` after `clone`; undefined for anything else
 * (`--help`, another flag, a missing value, a third word), which the tree parses.
 */
export const directClone = (argv: ReadonlyArray<string>): Effect.Effect<ExitCode, never, Exclude<CommandServices, Output>> | undefined => {
  const words: Array<string> = []
  const flags = new Map<string, string>()
  let json = false
  for (let i = 0; i < argv.length;) {
    const arg = argv[i]!
    if (arg === "--json") {
      if (json) return undefined
      json = true
      i += 1
      continue
    }
    if (arg.startsWith("-")) {
      const name = arg.startsWith("--remote") ? "remote" : arg.startsWith("--branch") && words.length > 0 ? "branch" : undefined
      const taken = name === undefined ? undefined : flagValue(argv, i, name)
      if (name === undefined || taken === undefined || taken[0] === undefined || flags.has(name)) return undefined
      flags.set(name, taken[0])
      i += taken[1]
      continue
    }
    words.push(arg)
    i += 1
  }
  if (words[0] !== "clone" || words.length < 2 || words.length > 3) return undefined
  const input: CloneInput = { repo: words[1]!, dest: Option.fromUndefinedOr(words[2]), branch: Option.fromUndefinedOr(flags.get("branch")) }
  return withExitCode(runBody(json, flags.get("remote"), cloneBody(input)), (reported) => reported.exitCode)
}
