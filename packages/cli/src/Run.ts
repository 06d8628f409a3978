/**
 * One invocation run against the real environment (main.ts loads this once it is not `--version`). Effect is
 * imported here by name, not as `import("effect")`: a dynamic import of the package needs its whole namespace,
 * which put every module of effect in the bundle's shared chunk and evaluated all of them at each start.
 */
import { Effect, Exit, Fiber, Layer } from "effect"
import { CliEnv } from "./CliEnv.ts"
import { CredentialStore } from "./Credentials.ts"
import { direct } from "./Direct.ts"
import type { ExitCode } from "./Failures.ts"
import { Interaction } from "./Interaction.ts"

export const runMain = async (argv: ReadonlyArray<string>): Promise<ExitCode> => {
  // `grove push` and the other argument-less commands skip the command tree (Direct.ts).
  const program = direct(argv) ?? (await import("./Cli.ts")).run(argv)
  const live = Layer.mergeAll(CredentialStore.layer, Interaction.layer).pipe(Layer.provideMerge(CliEnv.layer))
  const fiber = Effect.runFork(program.pipe(Effect.provide(live)))
  // Ctrl-C or SIGTERM interrupts the command, so its finalizers run (a clone removes its folder and revokes its key)
  // instead of node ending the process mid-write. A second signal ends it at once, cleanup or not.
  let signalled: number | undefined
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled !== undefined) process.exit(signalled)
    signalled = signal === "SIGINT" ? 130 : 143
    fiber.interruptUnsafe()
  }
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
  try {
    const exit = await Effect.runPromise(Fiber.await(fiber))
    if (Exit.isSuccess(exit)) return exit.value
    // Cleaned up: end now, as the signal would have, not when whatever the interruption left open has closed.
    if (signalled !== undefined) process.exit(signalled)
    return await Effect.runPromise(exit)
  } finally {
    process.off("SIGINT", onSignal)
    process.off("SIGTERM", onSignal)
  }
}
