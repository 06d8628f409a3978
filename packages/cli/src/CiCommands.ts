/** `grove ci ...`: CI runs and secrets of a repository. The body is imported on first use, like every command's. */
import { Effect } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { action, load, Switch } from "./CommandAction.ts"

const ciModule = () => load(() => import("./commands/Ci.ts"))

const repoFlag = Flag.String("repo").pipe(Flag.withMetavar("OWNER/NAME"), Flag.withDescription("The repository (default: the checkout's)"), Flag.optional)
const idArgument = Argument.String("run").pipe(Argument.withDescription("The run's id"))

const runs = Command.make("runs", {
  repo: repoFlag,
  limit: Flag.Int("limit").pipe(Flag.withDefault(20), Flag.withDescription("How many runs, newest first (1-200, default 20)"))
}, (input) => action((remote) => Effect.flatMap(ciModule(), (m) => m.runs(remote, input)))).pipe(Command.withDescription("List recent CI runs"))

const show = Command.make("show", { repo: repoFlag, id: idArgument }, (input) =>
  action((remote) => Effect.flatMap(ciModule(), (m) => m.show(remote, input)))).pipe(Command.withDescription("Show a run: its jobs, steps and exit codes"))

const logs = Command.make("logs", {
  repo: repoFlag,
  id: idArgument,
  follow: Switch("follow").pipe(Flag.withAlias("f"), Flag.withDescription("Stream the output live until the run ends"))
}, (input) => action((remote) => Effect.flatMap(ciModule(), (m) => m.logs(remote, input)))).pipe(
  Command.withDescription("Print a run's logs (with -f, follow them live; exit 1 unless the run succeeds)")
)

const wait = Command.make("wait", {
  repo: repoFlag,
  id: idArgument,
  timeoutMinutes: Flag.Int("timeout").pipe(Flag.withDefault(30), Flag.withDescription("Minutes to wait (default 30)"))
}, (input) => action((remote) => Effect.flatMap(ciModule(), (m) => m.wait(remote, input)))).pipe(
  Command.withDescription("Wait until a run completes; exit 0 only if it succeeded")
)

const trigger = Command.make("trigger", {
  repo: repoFlag,
  workflow: Flag.String("workflow").pipe(Flag.withMetavar("NAME"), Flag.withDescription("One workflow (default: every workflow that runs on manual)"), Flag.optional),
  branch: Flag.String("branch").pipe(Flag.withMetavar("BRANCH"), Flag.withDescription("The branch (default: the checkout's, else main)"), Flag.optional),
  expectedCommit: Flag.String("expected-commit").pipe(
    Flag.withMetavar("HASH"),
    Flag.withDescription("Start only if the branch's head is still this commit (the exact-head trigger)"),
    Flag.optional
  ),
  key: Flag.String("idempotency-key").pipe(Flag.withMetavar("KEY"), Flag.withDescription("With --expected-commit: retrying with the same key starts nothing new"), Flag.optional)
}, (input) => action((remote) => Effect.flatMap(ciModule(), (m) => m.trigger(remote, input)))).pipe(
  Command.withDescription("Start workflows at a branch's head")
)

const cancel = Command.make("cancel", { repo: repoFlag, id: idArgument }, (input) =>
  action((remote) => Effect.flatMap(ciModule(), (m) => m.cancel(remote, input)))).pipe(
    Command.withDescription("Cancel a queued or running run (its processes are killed)")
  )

const secretName = Argument.String("name").pipe(Argument.withDescription("The secret's name (an environment variable name)"))
const secrets = Command.make("secrets").pipe(
  Command.withDescription("A repository's CI secrets (values are never shown)"),
  Command.withSubcommands([
    Command.make("list", { repo: repoFlag }, (input) => action((remote) => Effect.flatMap(ciModule(), (m) => m.secretsList(remote, input)))).pipe(
      Command.withDescription("List secret names and when they changed")
    ),
    Command.make("set", { repo: repoFlag, name: secretName }, (input) => action((remote) => Effect.flatMap(ciModule(), (m) => m.secretsSet(remote, input)))).pipe(
      Command.withDescription("Create or replace a secret; the value is read from stdin")
    ),
    Command.make("delete", { repo: repoFlag, name: secretName }, (input) => action((remote) => Effect.flatMap(ciModule(), (m) => m.secretsDelete(remote, input)))).pipe(
      Command.withDescription("Delete a secret")
    )
  ])
)

export const ci = Command.make("ci").pipe(
  Command.withDescription("CI: runs, logs and secrets"),
  Command.withSubcommands([runs, show, logs, wait, trigger, cancel, secrets])
)
