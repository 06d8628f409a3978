/**
 * How a command body runs once its global settings are known (`--json`, `--remote`): the chosen server,
 * `Output`, a failure printed once and turned into its exit code (`Reported`), and the invocation's exit
 * code. No effect/cli here: the argument-less content commands run without the command tree (Direct.ts),
 * the rest through it (CommandAction.ts reads the flags, then runs the body here).
 */
import { Console, Data, Effect } from "effect"
import { CliEnv } from "./CliEnv.ts"
import type { CredentialStore } from "./Credentials.ts"
import { defaultRemote } from "./CredentialResolver.ts"
import type { CliFailure } from "./Failures.ts"
import { ExitCode, usage } from "./Failures.ts"
import type { Interaction } from "./Interaction.ts"
import { Output } from "./Output.ts"
import { chooseRemote, DEFAULT_REMOTE, remoteGiven } from "./Remote.ts"

/** A failure that has been printed already; only its exit code is left to deliver. */
export class Reported extends Data.TaggedError("Reported")<{ readonly exitCode: ExitCode }> {}

export type CommandServices = Output | CliEnv | CredentialStore | Interaction

export type CommandBody = (remote: string) => Effect.Effect<void, CliFailure, CommandServices>

/** Runs a command body with the chosen server and `Output`, printing its failure. */
export const runBody = (json: boolean, remoteFlag: string | undefined, body: CommandBody) =>
  Effect.gen(function*() {
    const output = Output.make(json)
    const { env } = yield* CliEnv
    const chosen = chooseRemote(remoteFlag, env, remoteGiven(remoteFlag, env) ? DEFAULT_REMOTE : yield* defaultRemote())
    yield* ("error" in chosen ? Effect.fail(usage(chosen.error)) : body(chosen.remote)).pipe(
      Effect.provideService(Output, output),
      Effect.catchTag("CliFailure", (failure) =>
        Effect.andThen(output.failure(failure), Effect.fail(new Reported({ exitCode: failure.exitCode }))))
    )
  })

/** An invocation's exit code: 0, the failure's (`codeOf`), or 1 with the defect printed. */
export const withExitCode = <E, R>(effect: Effect.Effect<unknown, E, R>, codeOf: (error: E) => ExitCode): Effect.Effect<ExitCode, never, R> =>
  effect.pipe(
    Effect.as<ExitCode>(ExitCode.ok),
    Effect.catch((error) => Effect.succeed(codeOf(error))),
    Effect.catchCause((cause) => Effect.as(Console.error(`grove: internal error\n${String(cause)}`), ExitCode.error))
  )

export const load = <M>(module: () => Promise<M>) => Effect.promise(module)
