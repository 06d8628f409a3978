/**
 * One invocation run against the real environment (main.ts loads this once it is not `--version`). Effect is
 * imported here by name, not as `import("effect")`: a dynamic import of the package needs its whole namespace,
 * which put every module of effect in the bundle's shared chunk and evaluated all of them at each start.
 */
import { Console, Effect, Exit, Fiber, Layer } from "effect"
import { CliEnv } from "./CliEnv.ts"
import { CredentialStore } from "./Credentials.ts"
import { direct } from "./Direct.ts"
import { ExitCode } from "./Failures.ts"
import { Interaction } from "./Interaction.ts"
import { outputConsole, outputFailed, writeStderr, writeStdout } from "./Stdout.ts"
import { networkTimeouts } from "./sync/HttpSend.ts"

export const runMain = async (argv: ReadonlyArray<string>): Promise<ExitCode> => {
  // A bad GROVE_CONNECT_TIMEOUT or GROVE_IDLE_TIMEOUT is refused before anything is sent.
  const timeouts = networkTimeouts(process.env)
  if ("error" in timeouts) {
    if (argv.includes("--json")) writeStdout(`${JSON.stringify({ error: timeouts.error, code: "usage" }, null, 2)}\n`)
    else writeStderr(`grove: ${timeouts.error}\n`)
    return ExitCode.usage
  }
  // `grove push` and the other argument-less commands skip the command tree (Direct.ts).
  const program = direct(argv) ?? (await import("./Cli.ts")).run(argv)
  const live = Layer.mergeAll(CredentialStore.layer, Interaction.layer).pipe(Layer.provideMerge(CliEnv.layer))
  // Output through Stdout.ts: a write that fails (a full disk, a closed pipe) is one line and a failed exit, not lost.
  const fiber = Effect.runFork(program.pipe(Effect.provide(live), Effect.provideService(Console.Console, outputConsole())))
  // Ctrl-C or SIGTERM interrupts the command, so its finalizers run (a clone removes its folder and revokes its key)
  // instead of node ending the process mid-write. A second signal ends it at once, cleanup or not.
  let signalled: NodeJS.Signals | undefined
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled !== undefined) raise(signalled)
    signalled = signal
    fiber.interruptUnsafe()
  }
  const listen = (on: boolean) => {
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      if (on) process.on(signal, onSignal)
      else process.off(signal, onSignal)
    }
  }
  // Cleaned up: end now by the signal itself, as git does, so the shell sees a command killed by it (a script's loop
  // stops at Ctrl-C; an exit code of 130 would tell bash the command handled it) and not when whatever the interruption
  // left open has closed. With no listener left node's default action runs; the exit is for a signal not delivered.
  const raise = (signal: NodeJS.Signals): never => {
    listen(false)
    process.kill(process.pid, signal)
    return process.exit(signal === "SIGINT" ? 130 : 143)
  }
  listen(true)
  try {
    const exit = await Effect.runPromise(Fiber.await(fiber))
    if (Exit.isSuccess(exit)) return exit.value === ExitCode.ok && outputFailed() ? ExitCode.error : exit.value
    if (signalled !== undefined) raise(signalled)
    return await Effect.runPromise(exit)
  } finally {
    listen(false)
  }
}
