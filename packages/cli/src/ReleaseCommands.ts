/** `grove release publish` and `grove upgrade`. The bodies are imported on first use. */
import { Effect } from "effect"
import { Argument, Command } from "effect/cli"
import { action, load } from "./CommandAction.ts"

const releaseModule = () => load(() => import("./commands/Release.ts"))
const upgradeModule = () => load(() => import("./commands/Upgrade.ts"))

const publish = Command.make("publish", {
  version: Argument.String("version").pipe(Argument.withDescription("The version, MAJOR.MINOR.PATCH[-prerelease]")),
  platform: Argument.String("platform").pipe(Argument.withDescription("The platform, such as linux-x86_64")),
  file: Argument.String("file").pipe(Argument.withDescription("The binary to publish"))
}, (input) => action((remote) => Effect.flatMap(releaseModule(), (m) => m.publish(remote, input)))).pipe(
  Command.withDescription("Publish a client binary (needs a service-account key with the release scope)")
)

export const release = Command.make("release").pipe(
  Command.withDescription("Client releases"),
  Command.withSubcommands([publish])
)

export const upgrade = Command.make("upgrade", {}, () =>
  action((remote) => Effect.flatMap(upgradeModule(), (m) => m.upgrade(remote)))).pipe(
    Command.withDescription("Replace this grove with the server's newest release, checked by SHA-256 and minisign signature")
  )
