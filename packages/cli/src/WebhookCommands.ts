/** `grove webhook ...`: a repository's webhooks and their delivery log. The body is imported on first use. */
import { Effect } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { action, load } from "./CommandAction.ts"

const webhookModule = () => load(() => import("./commands/Webhook.ts"))
const repoFlag = Flag.String("repo").pipe(Flag.withMetavar("OWNER/NAME"), Flag.withDescription("The repository (default: the checkout's)"), Flag.optional)
const idArgument = Argument.String("id").pipe(Argument.withDescription("The webhook's id"))

const add = Command.make("add", {
  repo: repoFlag,
  url: Argument.String("url").pipe(Argument.withDescription("An http or https URL that resolves to public addresses")),
  events: Flag.String("events").pipe(Flag.withMetavar("LIST"), Flag.withDescription("push, branch.created, merge (comma-separated; default: all)"), Flag.optional),
  secretStdin: Flag.Boolean("secret-stdin").pipe(Flag.withDefault(false), Flag.withDescription("Read a signing secret from stdin"))
}, (input) => action((remote) => Effect.flatMap(webhookModule(), (m) => m.add(remote, input)))).pipe(Command.withDescription("Add a webhook"))

const list = Command.make("list", { repo: repoFlag }, (input) =>
  action((remote) => Effect.flatMap(webhookModule(), (m) => m.list(remote, input)))).pipe(Command.withDescription("List the repository's webhooks"))

const remove = Command.make("remove", { repo: repoFlag, id: idArgument }, (input) =>
  action((remote) => Effect.flatMap(webhookModule(), (m) => m.remove(remote, input)))).pipe(Command.withDescription("Remove a webhook"))

const deliveries = Command.make("deliveries", {
  repo: repoFlag,
  id: idArgument,
  limit: Flag.Int("limit").pipe(Flag.withDefault(20), Flag.withDescription("How many, newest first (1-200, default 20)"))
}, (input) => action((remote) => Effect.flatMap(webhookModule(), (m) => m.deliveries(remote, input)))).pipe(
  Command.withDescription("A webhook's recent deliveries: status, attempts, HTTP status, duration, error")
)

const redeliver = Command.make("redeliver", {
  repo: repoFlag,
  id: idArgument,
  delivery: Argument.String("delivery").pipe(Argument.withDescription("The delivery to send again"))
}, (input) => action((remote) => Effect.flatMap(webhookModule(), (m) => m.redeliver(remote, input)))).pipe(
  Command.withDescription("Send a delivery again (as a new delivery)")
)

export const webhook = Command.make("webhook").pipe(
  Command.withDescription("Webhooks: deliveries of push, branch.created and merge events"),
  Command.withSubcommands([add, list, remove, deliveries, redeliver])
)
