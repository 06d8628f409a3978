/**
 * `grove init` and `grove clone`: a new checkout (`.grove/`), empty or holding
 * a repository's branch. A clone creates a personal key limited to the
 * repository and stores it in the checkout, bound to the server that issued it
 * (spec, Authentication rule 7).
 */
import { Names } from "@grove/core"
import { Effect, Exit, Fiber, Option } from "effect"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { type Connection, connect } from "../Client.ts"
import { unfinishedCloneText } from "../Checkout.ts"
import { CliEnv } from "../CliEnv.ts"
import type { CliFailure } from "../Failures.ts"
import { failure, usage } from "../Failures.ts"
import { EMPTY_SNAPSHOT } from "../local/Commit.ts"
import { exists, io } from "../local/Io.ts"
import type { BranchState } from "../local/State.ts"
import { initialState, newBranch, withBranch } from "../local/State.ts"
import { recordWithheld, withheldLine } from "../local/Withheld.ts"
import { openAt, saveState, writeConfig } from "../local/Workspace.ts"
import { Output } from "../Output.ts"
import type { FreshBranch } from "../sync/Fetch.ts"
import type { EarlyFetch } from "../sync/EarlyFetch.ts"
import type { PullAhead } from "../sync/PullAhead.ts"
import { fetchEarly } from "../sync/EarlyFetch.ts"
import { checkFresh, materialize, pull, storeFresh } from "../sync/Fetch.ts"
import { repoRemote } from "../sync/RemoteRepo.ts"
import { personalBranchName, whoami } from "../sync/Session.ts"
import { checkName } from "./Branch.ts"

const capitalized = (text: string) => `${text[0]!.toUpperCase()}${text.slice(1)}`

export const init = Effect.fn("Init.run")(function*(remote: string, options: {
  readonly owner: Option.Option<string>
  readonly name: Option.Option<string>
}) {
  const out = yield* Output
  const { cwd, env } = yield* CliEnv
  const root = path.resolve(cwd)
  if (yield* io("cannot read the directory", () => exists(path.join(root, ".grove", "state.json")))) {
    return yield* failure(`${root} is already a grove checkout`, "already_a_checkout")
  }
  const name = Option.getOrElse(options.name, () => path.basename(root))
  const nameCheck = Names.checkRepoName(name)
  if (!nameCheck.ok) return yield* usage(`invalid repository name ${JSON.stringify(name)}: ${nameCheck.reason} (use --name)`)
  if (Option.isSome(options.owner)) {
    const ownerCheck = Names.checkSlug(options.owner.value, "owner")
    if (!ownerCheck.ok) return yield* usage(`invalid --owner ${JSON.stringify(options.owner.value)}: ${ownerCheck.reason}`)
  }
  // The server must answer (a mistyped --remote is found now, not at the first push).
  const connection = yield* connect(remote)
  yield* connection.call(connection.client.system.version())
  // The author of local commits: the signed-in user when the server can say, else the local account.
  const signedIn = yield* whoami(connection).pipe(Effect.option)
  const user = Option.getOrElse(signedIn, () => Option.getOrElse(options.owner, () => env["USER"] ?? "anonymous"))
  const owner = Option.getOrElse(options.owner, () => user)
  // Whether the repository is there already: true, false, or null when this caller cannot tell.
  const existing = yield* connection.call(connection.client.repos.get({ params: { owner, name } })).pipe(
    Effect.map((): boolean | null => true),
    Effect.catchIf((error) => error.details?.["status"] === 404, () => Effect.succeed<boolean | null>(Option.isSome(signedIn) ? false : null)),
    Effect.orElseSucceed((): boolean | null => null)
  )
  const branch = newBranch(personalBranchName(user))
  const workspace = yield* writeConfig(root, {
    remote,
    ...Option.match(options.owner, { onNone: () => ({}), onSome: (owner) => ({ owner }) }),
    name
  })
  yield* saveState(workspace, initialState(user, branch))
  const fullName = `${owner}/${name}`
  const repositoryLine = existing === true
    ? `${fullName} on ${remote} (it exists already: to work on its files, grove clone ${fullName} instead)`
    : existing === false
    ? `${fullName} on ${remote} (it does not exist yet: the first grove push creates it, private)`
    : `${fullName} on ${remote} (cannot tell whether it exists${Option.isNone(signedIn) ? ": not signed in (grove login)" : ""}; the first grove push creates it when missing)`
  yield* out.result(
    {
      path: root,
      remote,
      owner: workspace.config.owner ?? null,
      name,
      branch: branch.name,
      parent_branch: "main",
      user,
      repository: fullName,
      repository_exists: existing
    },
    () => `Initialized a grove checkout in ${root}\nRepository: ${repositoryLine}\nBranch:     ${branch.name} (from main)`
  )
})

export const clone = Effect.fn("Clone.run")(function*(remote: string, options: {
  readonly repo: string
  readonly dest: Option.Option<string>
  readonly branch: Option.Option<string>
}, ahead?: PullAhead) {
  // A pull sent ahead (before this module loaded) and not taken is stopped.
  yield* Effect.addFinalizer(() => Effect.sync(() => ahead?.cancel()))
  const out = yield* Output
  const { cwd } = yield* CliEnv
  const parsed = Names.parseFullName(options.repo)
  if (parsed === undefined) return yield* usage(`expected a repository as owner/name, got ${JSON.stringify(options.repo)}`)
  if (Option.isSome(options.branch)) yield* checkName(options.branch.value)
  const root = path.resolve(cwd, Option.getOrElse(options.dest, () => parsed.name))
  // Only a missing or empty folder: anything else (the user's files, hidden ones too; a file; a folder
  // that cannot be read) is refused before anything is written, so a failed clone never removes them.
  const entries = yield* io(`cannot read ${root}`, () =>
    fs.readdir(root).catch((error: NodeJS.ErrnoException): Array<string> | undefined => error.code === "ENOENT" ? [] : undefined))
  if (entries === undefined || entries.length > 0) {
    // .grove without its config.json: a clone that was killed before it finished (the config is written last).
    const unfinished = entries?.includes(".grove") === true && !(yield* io(`cannot read ${root}`, () => exists(path.join(root, ".grove", "config.json"))))
    if (unfinished) {
      return yield* failure(unfinishedCloneText(root), "destination_exists")
    }
    return yield* failure(
      `${root} exists and is not an empty folder: clone into a new or empty folder (grove clone ${options.repo} DEST)`,
      "destination_exists"
    )
  }

  const connection = yield* connect(remote)
  const remoteRepo = repoRemote(connection, parsed.owner, parsed.name)
  // The pull goes out first, with the caller's own credential: nothing it asks depends on the calls below, whose
  // failures still come first (its own is seen only when the clone takes its answer). Its answer is decoded and
  // checked (nothing written) while they are answered, and the files' first chunk requests go out as soon as it is parsed:
  // the server reads those chunks while the checkout is made (their answers wait until the download takes them).
  let early: EarlyFetch | undefined
  const pulling = yield* Effect.forkChild(
    checkFresh((onParsed) => pull(remoteRepo, Option.getOrElse(options.branch, () => "main"), null, ahead, onParsed), (snapshot, wanted) => {
      early = fetchEarly(remoteRepo, snapshot, wanted)
    }),
    { startImmediately: true }
  )
  // Requests the download did not take (the clone failed before it) are stopped.
  yield* Effect.addFinalizer(() => Effect.sync(() => early?.cancel()))
  // Both at once: neither needs the other, and the files' first answers are taken only once both are in.
  const [repository, user] = yield* Effect.all([
    connection.call(connection.client.repos.get({ params: parsed })),
    whoami(connection).pipe(Effect.orElseSucceed(() => "anonymous"))
  ], { concurrency: 2 })
  const made = !(yield* io(`cannot read ${root}`, () => exists(root)))
  // A key for this repository only, kept in the checkout: the checkout keeps working without the login session. The
  // clone itself pulls and downloads with the caller's credential (the key has no more rights), so neither waits for it.
  const makeKey = connection.call(connection.client.apiKeys.create({
    payload: { name: `grove checkout ${path.basename(root)} on ${os.hostname()}`, repo: repository.full_name }
  }))
  let keying: Fiber.Fiber<Effect.Success<typeof makeKey>, CliFailure> | undefined
  // A failed clone leaves nothing behind: not the folder it made (or what it put in an empty one), not its key. The
  // undo covers everything from the moment the key is asked for: once that request is out, the key may exist.
  const undo = Effect.gen(function*() {
    yield* io(`cannot remove ${root}`, async () => {
      if (made) await fs.rm(root, { recursive: true, force: true })
      else for (const entry of await fs.readdir(root)) await fs.rm(path.join(root, entry), { recursive: true, force: true })
    }).pipe(Effect.ignore)
    // Bounded: an interrupted clone (Ctrl-C) must end even when the server no longer answers.
    yield* Effect.gen(function*() {
      const created = keying === undefined ? undefined : yield* Fiber.await(keying)
      if (created !== undefined && Exit.isSuccess(created)) {
        yield* connection.call(connection.client.apiKeys.revoke({ params: { id: created.value.id } }))
      }
    }).pipe(Effect.timeout(UNDO_KEY_MS), Effect.ignore)
  })
  const { answer, applied, current, snapshot, target } = yield* Effect.gen(function*() {
    if (Option.isSome(connection.credential)) keying = yield* Effect.forkChild(makeKey, { startImmediately: true })
    const asked = keying
    const key = asked === undefined ? Effect.succeed(undefined) : Effect.map(Fiber.join(asked), (created) => created.key)
    return yield* populate(remote, root, parsed, repository.full_name, user, key, connection, options.branch, Fiber.join(pulling), () => early)
  }).pipe(Effect.onError(() => undo))
  yield* out.result(
    {
      repository: repository.full_name,
      path: root,
      branch: current.name,
      tracking: target,
      head: answer.head,
      files: snapshot.size - applied.withheld,
      downloaded_blobs: applied.downloadedBlobs,
      withheld_paths: applied.withheld,
      key_stored: keying !== undefined
    },
    () =>
      `Cloned ${repository.full_name} (${target}${answer.head === null ? ", empty" : ` at ${answer.head.slice(0, 12)}`}) into ${root}: ${snapshot.size - applied.withheld} file(s)\n` +
      (applied.withheld === 0 ? "" : `${capitalized(withheldLine(applied.withheld))}.\n`) +
      `Branch: ${current.name}${current.name === target ? "" : ` (from ${target})`}`
  )
}, Effect.scoped)

/** How long a failed or interrupted clone waits for its key to be made and revoked. */
const UNDO_KEY_MS = "10 seconds"

/** A clone's checkout in `root`: config, the branch's history, state and files. */
const populate = Effect.fnUntraced(function*(
  remote: string,
  root: string,
  parsed: { readonly owner: string; readonly name: string },
  fullName: string,
  user: string,
  /** The checkout's key, being made meanwhile (none without a credential). */
  key: Effect.Effect<string | undefined, CliFailure>,
  connection: Connection,
  branchOption: Option.Option<string>,
  pulled: Effect.Effect<FreshBranch, CliFailure>,
  /** The files' chunk requests sent already, if any (once `pulled` is done). */
  early: () => EarlyFetch | undefined
) {
  // `.grove/config.json`, which makes the folder a checkout, is written last, once every file is in place: a clone
  // killed where no handler runs (kill -9, power loss) leaves a folder no command takes for a checkout, whose
  // missing files `status` would list as deleted and a push would publish.
  yield* io(`cannot create ${root}`, () => fs.mkdir(path.join(root, ".grove"), { recursive: true }))
  const config = { remote, owner: parsed.owner, name: parsed.name }
  const workspace = openAt(root, config)
  const repo = repoRemote(connection, parsed.owner, parsed.name)
  const target = Option.getOrElse(branchOption, () => "main")
  const fresh = yield* pulled
  const { answer, snapshot } = fresh
  yield* recordWithheld(workspace.root, [answer])
  if (Option.isSome(branchOption) && answer.branch === null) {
    return yield* failure(`${fullName} has no branch ${JSON.stringify(target)}`, "no_such_branch")
  }
  const tracked: BranchState = newBranch(target, {
    parent_branch: answer.branch?.parent_branch ?? (target === "main" ? null : "main"),
    description: answer.branch?.description ?? null,
    status: answer.branch?.status === "closed" || answer.branch?.status === "merged" ? answer.branch.status : "open",
    created_at: answer.branch?.created_at ?? new Date().toISOString(),
    remote_head: answer.head,
    head: answer.head
  })
  // main changes only by merge: work on main happens on a personal branch started from its head.
  const current = target === "main" ? newBranch(personalBranchName(user), { head: answer.head }) : tracked
  const state = withBranch(initialState(user, current), tracked)
  // The files download (their first requests sent) before the history and state are written: the server reads
  // chunks meanwhile. Writes that fail stop the download (and wait until it has stopped writing) before the caller
  // removes the checkout, so the failure is told at once.
  let requested!: () => void
  const sent = new Promise<void>((resolve) => (requested = resolve))
  const download = yield* Effect.forkChild(
    materialize(workspace, repo, EMPTY_SNAPSHOT, snapshot, new Map(), answer.blobs, answer.head, true, requested, early()),
    { startImmediately: true }
  )
  // An interruption while the files download (Ctrl-C) stops the download too, and waits until it has stopped writing,
  // before the caller removes the checkout: the download is a child fiber, which outlives an interrupted join.
  const applied = yield* Effect.gen(function*() {
    // The history is written (synchronously, ~300 trees) once the first requests are out, not before: the server
    // then reads the chunks meanwhile. A download that ends first (it failed) lets the writes go at once.
    yield* Effect.raceFirst(Effect.promise(() => sent), Effect.asVoid(Fiber.await(download)))
    yield* storeFresh(workspace, fresh)
    yield* saveState(workspace, state)
    const made = yield* key
    const placed = yield* Fiber.join(download)
    yield* writeConfig(root, made === undefined ? config : { remote, key: made, owner: parsed.owner, name: parsed.name })
    return placed
  }).pipe(Effect.onError(() => Fiber.interrupt(download)))
  return { answer, applied, current, snapshot, target }
})
