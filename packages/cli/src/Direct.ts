/**
 * The content commands that take no argument (`commit`, `push`, `pull`, `status`), run without the command
 * tree when the invocation is exactly the command's word, with or without `--json`: building effect/cli's
 * tree of every command's flags and parsing with it is ~10% of a one-file push's CPU, for nothing to
 * parse. Anything else (another flag, `--help`, a typo) goes through the tree (Cli.ts), which uses these
 * same bodies, so both ways run the same command.
 */
import { Effect } from "effect"
import type { CommandBody, CommandServices } from "./CommandRun.ts"
import { load, runBody, withExitCode } from "./CommandRun.ts"
import type { ExitCode } from "./Failures.ts"
import type { Output } from "./Output.ts"

const localModule = () => load(() => import("./commands/Local.ts"))

/** The bodies, by command word (Cli.ts gives each its description). */
export const plainCommands = {
  commit: () => Effect.flatMap(localModule(), (m) => m.commit()),
  push: () => Effect.flatMap(load(() => import("./commands/Push.ts")), (m) => m.push()),
  pull: () => Effect.flatMap(load(() => import("./commands/Pull.ts")), (m) => m.pull()),
  status: () => Effect.flatMap(localModule(), (m) => m.status())
} satisfies Record<string, CommandBody>

/**
 * The run of `argv` when it is one of `plainCommands`' words alone or with `--json` (before or after it);
 * undefined otherwise.
 */
export const direct = (argv: ReadonlyArray<string>): Effect.Effect<ExitCode, never, Exclude<CommandServices, Output>> | undefined => {
  const words = argv.filter((a) => a !== "--json")
  const command = words.length === 1 && argv.length - words.length <= 1 && Object.hasOwn(plainCommands, words[0]!)
    ? plainCommands[words[0] as keyof typeof plainCommands]
    : undefined
  if (command === undefined) return undefined
  return withExitCode(runBody(argv.includes("--json"), undefined, command), (reported) => reported.exitCode)
}
