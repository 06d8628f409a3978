/**
 * The `grove` command tree (effect/cli) and `run`, which turns one invocation
 * into an exit code. Command bodies are imported on first use: the HTTP client
 * and the API schemas cost more start-up time than parsing and `--help`.
 */
import { Console, Effect, FileSystem, Layer, Option, Path, Stdio, Terminal } from "effect"
import { Argument, CliConfig, CliError, CliOutput, Command, Flag, GlobalFlag } from "effect/cli"
import { ChildProcessSpawner } from "effect/process"
import { group, key, org, perms, sa } from "./AccessCommands.ts"
import { ci } from "./CiCommands.ts"
import { webhook } from "./WebhookCommands.ts"
import { watch } from "./WatchCommands.ts"
import { release, upgrade } from "./ReleaseCommands.ts"
import { action, type CommandServices, JsonFlag, load, RemoteFlag, Reported, Switch } from "./CommandAction.ts"
import { withExitCode } from "./CommandRun.ts"
import { cloneBody, plainCommands } from "./Direct.ts"
import { PLATFORM, VERSION } from "./BuildInfo.ts"
import { ExitCode } from "./Failures.ts"
import type { Output } from "./Output.ts"

export { VERSION } from "./BuildInfo.ts"

export { JsonFlag, RemoteFlag }

const loginModule = () => load(() => import("./commands/Login.ts"))
const repoModule = () => load(() => import("./commands/Repo.ts"))
const initModule = () => load(() => import("./commands/Init.ts"))
const branchModule = () => load(() => import("./commands/Branch.ts"))
const localModule = () => load(() => import("./commands/Local.ts"))

const login = Command.make("login", {
  headless: Switch("headless").pipe(
    Flag.withDescription("No browser here: sign in on any device and paste the one-time code")
  )
}, (input) => action((remote) => Effect.flatMap(loginModule(), (m) => m.login(remote, input)))).pipe(
  Command.withDescription(
    "Sign in to a server with your browser and keep a login session (90 days) in ~/.grove/credentials"
  )
)

const logout = Command.make("logout", {}, () =>
  action((remote) => Effect.flatMap(loginModule(), (m) => m.logout(remote)))).pipe(
    Command.withDescription("Forget the login session for a server")
  )

const authStatus = Command.make("status", {}, () =>
  action((remote) =>
    Effect.flatMap(load(() => import("./commands/AuthStatus.ts")), (m) => m.authStatus(remote))
  )).pipe(
    Command.withDescription(
      "Show which credential is used (SERVICE_API_KEY, then the checkout's key, then the login session) and who it is"
    )
  )

const auth = Command.make("auth").pipe(
  Command.withDescription("Inspect credentials"),
  Command.withSubcommands([authStatus])
)

const repoArgument = Argument.String("owner/name").pipe(Argument.withDescription("The repository, as owner/name"))

const repoList = Command.make("list", {
  sort: Flag.Literals("sort", ["name", "updated", "created"]).pipe(
    Flag.withDescription("Order of the list"),
    Flag.optional
  )
}, (input) => action((remote) => Effect.flatMap(repoModule(), (m) => m.list(remote, input)))).pipe(
  Command.withDescription("List the repositories you can access")
)

const repoCreate = Command.make("create", {
  name: Argument.String("name").pipe(Argument.withDescription("The new repository's name")),
  org: Flag.String("org").pipe(
    Flag.withMetavar("SLUG"),
    Flag.withDescription("Create it in this organization (default: your personal organization)"),
    Flag.optional
  ),
  public: Switch("public").pipe(Flag.withDescription("Make it public (default: private)")),
  description: Flag.String("description").pipe(Flag.withMetavar("TEXT"), Flag.withDescription("A description"), Flag.optional)
}, (input) => action((remote) => Effect.flatMap(repoModule(), (m) => m.create(remote, input)))).pipe(
  Command.withDescription("Create a repository")
)

const repoShow = Command.make("show", { repo: repoArgument }, (input) =>
  action((remote) => Effect.flatMap(repoModule(), (m) => m.show(remote, input)))).pipe(
    Command.withDescription("Show one repository")
  )

const repoDelete = Command.make("delete", {
  repo: repoArgument,
  yes: Switch("yes").pipe(
    Flag.withAlias("y"),
    Flag.withDescription("Do not ask for confirmation (required when stdin is not a terminal)")
  )
}, (input) => action((remote) => Effect.flatMap(repoModule(), (m) => m.remove(remote, input)))).pipe(
  Command.withDescription("Delete a repository and all its history")
)

const repoVisibility = Command.make("visibility", {
  visibility: Argument.Literals("visibility", ["public", "private"]).pipe(
    Argument.withDescription("public: anyone can read it (zip, git clone); private: only those with access")
  ),
  repo: repoArgument.pipe(Argument.withDescription("The repository, as owner/name (default: this checkout's)"), Argument.optional)
}, (input) => action((remote) => Effect.flatMap(repoModule(), (m) => m.visibility(remote, input)))).pipe(
  Command.withDescription("Make a repository public or private")
)

const repo = Command.make("repo").pipe(
  Command.withDescription("Manage repositories"),
  Command.withSubcommands([repoList, repoCreate, repoShow, repoDelete, repoVisibility])
)

const auditCommand = Command.make("audit", {
  org: Flag.String("org").pipe(
    Flag.withMetavar("ORG"),
    Flag.withDescription("The organization (default: your personal organization)"),
    Flag.optional
  ),
  action: Flag.String("action").pipe(Flag.withMetavar("A"), Flag.withDescription("Only entries of this action, e.g. repo.delete"), Flag.optional),
  actor: Flag.String("actor").pipe(Flag.withMetavar("NAME"), Flag.withDescription("Only entries by this user or service:<name>"), Flag.optional)
}, (input) => action((remote) => Effect.flatMap(load(() => import("./commands/Audit.ts")), (m) => m.audit(remote, input)))).pipe(
  Command.withDescription("Show an organization's audit log, newest first (owners and admins)")
)

// ---- Content commands. In a checkout they talk to the server the checkout is bound to. ----

const init = Command.make("init", {
  owner: Flag.String("owner").pipe(
    Flag.withMetavar("OWNER"),
    Flag.withDescription("Owner of the repository (default: you; an organization slug works too)"),
    Flag.optional
  ),
  name: Flag.String("name").pipe(
    Flag.withMetavar("NAME"),
    Flag.withDescription("Repository name (default: the directory's name)"),
    Flag.optional
  )
}, (input) => action((remote) => Effect.flatMap(initModule(), (m) => m.init(remote, input)))).pipe(
  Command.withDescription("Make the current directory a checkout; the first grove push creates the repository")
)

const clone = Command.make("clone", {
  repo: repoArgument,
  dest: Argument.String("dest").pipe(Argument.withDescription("Directory to create (default: the name)"), Argument.optional),
  branch: Flag.String("branch").pipe(
    Flag.withMetavar("BRANCH"),
    Flag.withDescription("Check out this branch (default: main, with a new personal branch on top)"),
    Flag.optional
  )
}, (input) => action(cloneBody(input))).pipe(
  Command.withDescription("Copy a repository's files into a new checkout (stores a key for that repository in it)")
)

const switchCommand = Command.make("switch", {
  name: Argument.String("name").pipe(Argument.withDescription("The branch to work on"), Argument.optional),
  create: Switch("create").pipe(
    Flag.withAlias("c"),
    Flag.withDescription("Create the branch from main (without a name: a personal branch <user>-<6 hex>); work made on main moves to it")
  ),
  discard: Switch("discard").pipe(
    Flag.withDescription("Leaving main: drop its uncommitted changes and unpushed commits instead of refusing")
  )
}, (input) => action(() => Effect.flatMap(branchModule(), (m) => m.switchBranch(input)))).pipe(
  Command.withDescription("Work on another branch (a branch's work is committed first; main's moves with -c)")
)

const desc = Command.make("desc", {
  text: Argument.String("text").pipe(Argument.withDescription("The branch's description (the squash commit's message)"))
}, (input) => action(() => Effect.flatMap(branchModule(), (m) => m.describe(input)))).pipe(
  Command.withDescription("Set the current branch's description")
)

const close = Command.make("close", {}, () => action(() => Effect.flatMap(branchModule(), (m) => m.close()))).pipe(
  Command.withDescription("Close the current branch")
)

const commit = Command.make("commit", {}, () => action(plainCommands.commit)).pipe(
  Command.withDescription("Record the working tree as a local checkpoint (no message)")
)

const push = Command.make("push", {}, () => action(plainCommands.push)).pipe(
    Command.withDescription("Commit, then publish the branch's new commits (the first push creates the repository)")
  )

const pull = Command.make("pull", {}, () => action(plainCommands.pull)).pipe(
    Command.withDescription("Fetch the branch and merge its parent in; conflicts get markers (exit code 5)")
  )

const merge = Command.make("merge", {
  branch: Argument.String("branch").pipe(Argument.withDescription("The branch to merge (default: the current one)"), Argument.optional),
  force: Switch("force").pipe(
    Flag.withDescription("Merge even when CI on the branch is running or failing (recorded in the audit log)")
  ),
  wait: Flag.Finite("wait").pipe(
    Flag.withOptionalValue("30"),
    Flag.withMetavar("MINUTES"),
    Flag.withDescription("While CI holds the merge back, retry until it lands (default 30 minutes)"),
    Flag.optional
  )
}, (input) =>
  action(() => Effect.flatMap(load(() => import("./commands/Merge.ts")), (m) => m.merge(input)))).pipe(
    Command.withDescription(
      "Push, then squash-merge the branch onto main and move to a new branch from the new main (conflicts: exit 5)"
    )
  )

const revert = Command.make("revert", {
  hash: Argument.String("hash").pipe(Argument.withDescription("The commit to undo (full hash; on main: a squash commit)"))
}, (input) =>
  action(() => Effect.flatMap(load(() => import("./commands/Revert.ts")), (m) => m.revert(input)))).pipe(
    Command.withDescription("Land a commit that undoes a commit on its branch (conflicts: exit 5)")
  )

const status = Command.make("status", {}, () => action(plainCommands.status)).pipe(
  Command.withDescription("Show the branch and what changed since the last commit")
)

const log = Command.make("log", {
  limit: Flag.Int("limit").pipe(
    Flag.withAlias("n"),
    Flag.withDescription("Show at most this many commits"),
    Flag.optional
  )
}, (input) =>
  action(() => Effect.flatMap(localModule(), (m) => m.log({ limit: Option.getOrUndefined(input.limit) })))).pipe(
    Command.withDescription("Show the branch's commits, newest first")
  )

const reviewModule = () => load(() => import("./commands/Review.ts"))
const reviewRepo = Flag.String("repo").pipe(Flag.withMetavar("OWNER/NAME"), Flag.withDescription("The repository (default: the checkout's)"), Flag.optional)

const diff = Command.make("diff", {
  branch: Argument.String("branch").pipe(Argument.withDescription("A branch: its changes against the merge base with main"), Argument.optional),
  repo: reviewRepo,
  color: Flag.Boolean("color").pipe(
    Flag.withOptionalValue("true"),
    Flag.withDefault(true),
    Flag.withDescription("Colour the diff on a terminal (--no-color, or NO_COLOR set, for plain text)")
  )
}, (input) =>
  action((remote) =>
    Option.match(input.branch, {
      onSome: (branch) => Effect.flatMap(reviewModule(), (m) => m.diff(remote, { branch, repo: input.repo, color: input.color })),
      onNone: () => Effect.flatMap(localModule(), (m) => m.diff({ color: input.color }))
    }))).pipe(
    Command.withDescription("Show the working tree's changes against the last commit, or with BRANCH that branch's changes against its merge base with main, as a unified diff")
  )

const branchCommand = Command.make("branch").pipe(
  Command.withDescription("Review branches: what waits to be merged, with CI and whether it merges cleanly"),
  Command.withSubcommands([
    Command.make("list", {
      status: Flag.Literals("status", ["open", "closed", "merged"]).pipe(Flag.withDescription("Which branches (default: open)"), Flag.optional),
      repo: reviewRepo
    }, (input) => action((remote) => Effect.flatMap(reviewModule(), (m) => m.list(remote, input)))).pipe(
      Command.withDescription("List branches: name, author, last update, CI, whether it merges cleanly, head, description")
    ),
    Command.make("show", {
      name: Argument.String("name").pipe(Argument.withDescription("The branch")),
      repo: reviewRepo
    }, (input) => action((remote) => Effect.flatMap(reviewModule(), (m) => m.show(remote, input)))).pipe(
      Command.withDescription("Show a branch: description, CI, mergeability, its commits and the files it changes")
    )
  ])
)

export const grove = Command.make("grove").pipe(
  Command.withDescription(
    "The Grove command-line client. Exit codes: 0 ok, 1 error (the server said no), 2 usage, 5 merge conflicts, 6 network or authentication."
  ),
  Command.withSubcommands([
    login,
    logout,
    auth,
    repo,
    org,
    group,
    sa,
    key,
    perms,
    auditCommand,
    init,
    clone,
    switchCommand,
    desc,
    commit,
    push,
    pull,
    merge,
    ci,
    webhook,
    release,
    upgrade,
    revert,
    status,
    log,
    diff,
    branchCommand,
    close,
    watch
  ]),
  Command.withGlobalFlags([JsonFlag, RemoteFlag])
)

/** `--json` as given on the command line, for output printed before the command runs (usage errors). */
export const wantsJson = (argv: ReadonlyArray<string>): boolean => {
  const end = argv.indexOf("--")
  return (end === -1 ? argv : argv.slice(0, end)).some((arg) => arg === "--json" || arg === "--json=true")
}

/**
 * Help asked for goes to stdout; help shown because of a usage error goes to
 * stderr with the error (or, with `--json`, only `{ error, code: "usage" }` on stdout).
 */
const presenter = (json: boolean): CliOutput.Presenter => ({
  present: (event) =>
    Effect.gen(function*() {
      const formatter = yield* CliOutput.Formatter
      switch (event._tag) {
        case "Version":
          return yield* Console.log(formatter.formatVersion(event.name, event.version))
        case "Help":
          if (event.reason === "Requested") return yield* Console.log(formatter.formatHelpDoc(event.helpDoc))
          if (json) return yield* Console.log(JSON.stringify({ error: "missing command", code: "usage" }, null, 2))
          return yield* Console.error(formatter.formatHelpDoc(event.helpDoc))
        case "InvalidInvocation": {
          if (json) {
            const error = event.errors.map((e) => e.message).join("; ")
            return yield* Console.log(JSON.stringify({ error, code: "usage" }, null, 2))
          }
          yield* Console.error(formatter.formatHelpDoc(event.helpDoc))
          return yield* Console.error(formatter.formatErrors(event.errors))
        }
      }
    })
})

const unused = (what: string) => Effect.die(`grove does not use the ${what}`)

/**
 * effect/cli asks for these platform services for prompts, file flags, the wizard and
 * shell completions; grove uses none of them (only --help and --version are enabled),
 * so they are inert rather than pulling in a platform package at start-up.
 */
const cliPlatform = Layer.mergeAll(
  FileSystem.layerNoop({}),
  Path.layer,
  Stdio.layerTest({}),
  Layer.succeed(
    Terminal.Terminal,
    Terminal.make({
      columns: Effect.succeed(process.stdout.columns ?? 80),
      rows: Effect.succeed(process.stdout.rows ?? 24),
      size: unused("terminal"),
      readInput: unused("terminal"),
      readLine: unused("terminal"),
      display: () => unused("terminal")
    })
  ),
  Layer.succeed(ChildProcessSpawner.ChildProcessSpawner, ChildProcessSpawner.make(() => unused("process spawner"))),
  CliConfig.layer({ builtIns: [GlobalFlag.Help, GlobalFlag.Version] })
)

/** Runs one invocation (arguments without `node grove`) and answers its exit code. */
export const run = (argv: ReadonlyArray<string>): Effect.Effect<ExitCode, never, Exclude<CommandServices, Output>> =>
  withExitCode(Command.runWith(grove, { version: `${VERSION} (${PLATFORM})` })(argv), (error) =>
    error instanceof Reported
      ? error.exitCode
      : CliError.isCliError(error)
      // Parse errors and help shown for an incomplete command have been presented.
      ? ExitCode.usage
      : ExitCode.error).pipe(
    Effect.provide(Layer.merge(cliPlatform, CliOutput.layerPresenter(presenter(wantsJson(argv)))))
  )
