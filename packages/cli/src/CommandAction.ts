/**
 * How a command body runs: the global flags (`--json`, `--remote`), the chosen server, `Output`,
 * and a failure printed once and turned into its exit code (`Reported`).
 */
import { Data, Effect, Option } from "effect"
import { Flag, GlobalFlag } from "effect/cli"
import { CliEnv } from "./CliEnv.ts"
import type { CredentialStore } from "./Credentials.ts"
import type { CliFailure } from "./Failures.ts"
import { type ExitCode, usage } from "./Failures.ts"
import type { Interaction } from "./Interaction.ts"
import { Output } from "./Output.ts"
import { defaultRemote } from "./CredentialResolver.ts"
import { chooseRemote, DEFAULT_REMOTE, remoteGiven } from "./Remote.ts"

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
    Flag.withDescription(`The server (default: $GROVE_REMOTE, else the checkout's, else the last one logged in to, else ${DEFAULT_REMOTE})`),
    Flag.optional
  )
})

/** A failure that has been printed already; only its exit code is left to deliver. */
export class Reported extends Data.TaggedError("Reported")<{ readonly exitCode: ExitCode }> {}

export type CommandServices = Output | CliEnv | CredentialStore | Interaction

/** Runs a command body with the chosen server and `Output`, printing its failure. */
export const action = (body: (remote: string) => Effect.Effect<void, CliFailure, CommandServices>) =>
  Effect.gen(function*() {
    const output = Output.make(yield* JsonFlag)
    const remoteFlag = yield* RemoteFlag
    const { env } = yield* CliEnv
    const flag = Option.getOrUndefined(remoteFlag)
    const chosen = chooseRemote(flag, env, remoteGiven(flag, env) ? DEFAULT_REMOTE : yield* defaultRemote())
    yield* ("error" in chosen ? Effect.fail(usage(chosen.error)) : body(chosen.remote)).pipe(
      Effect.provideService(Output, output),
      Effect.catchTag("CliFailure", (failure) =>
        Effect.andThen(output.failure(failure), Effect.fail(new Reported({ exitCode: failure.exitCode }))))
    )
  })

export const load = <M>(module: () => Promise<M>) => Effect.promise(module)
