/** The `grove` program: the command tree run against the real environment. */
import { Effect, Layer } from "effect"
import { run } from "./Cli.ts"
import { CliEnv } from "./CliEnv.ts"
import { CredentialStore } from "./Credentials.ts"
import { Interaction } from "./Interaction.ts"

const live = Layer.mergeAll(CredentialStore.layer, Interaction.layer).pipe(Layer.provideMerge(CliEnv.layer))

process.exitCode = await Effect.runPromise(run(process.argv.slice(2)).pipe(Effect.provide(live)))
