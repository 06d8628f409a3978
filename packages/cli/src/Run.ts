/**
 * One invocation run against the real environment (main.ts loads this once it is not `--version`). Effect is
 * imported here by name, not as `import("effect")`: a dynamic import of the package needs its whole namespace,
 * which put every module of effect in the bundle's shared chunk and evaluated all of them at each start.
 */
import { Effect, Layer } from "effect"
import { CliEnv } from "./CliEnv.ts"
import { CredentialStore } from "./Credentials.ts"
import { direct } from "./Direct.ts"
import type { ExitCode } from "./Failures.ts"
import { Interaction } from "./Interaction.ts"

export const runMain = async (argv: ReadonlyArray<string>): Promise<ExitCode> => {
  // `grove push` and the other argument-less commands skip the command tree (Direct.ts).
  const program = direct(argv) ?? (await import("./Cli.ts")).run(argv)
  const live = Layer.mergeAll(CredentialStore.layer, Interaction.layer).pipe(Layer.provideMerge(CliEnv.layer))
  return Effect.runPromise(program.pipe(Effect.provide(live)))
}
