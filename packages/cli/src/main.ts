/**
 * The `grove` program: the command tree run against the real environment. `grove --version` alone is
 * answered before anything else is loaded: the command tree and Effect's runtime are most of a start
 * (`--version` with anything else still goes through effect/cli, which prints the same line).
 */
import { VERSION_LINE } from "./BuildInfo.ts"

const argv = process.argv.slice(2)
if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-v")) {
  process.stdout.write(`${VERSION_LINE}\n`)
} else {
  const [{ Effect, Layer }, { run }, { CliEnv }, { CredentialStore }, { Interaction }] = await Promise.all([
    import("effect"),
    import("./Cli.ts"),
    import("./CliEnv.ts"),
    import("./Credentials.ts"),
    import("./Interaction.ts")
  ])
  const live = Layer.mergeAll(CredentialStore.layer, Interaction.layer).pipe(Layer.provideMerge(CliEnv.layer))
  process.exitCode = await Effect.runPromise(run(argv).pipe(Effect.provide(live)))
}
