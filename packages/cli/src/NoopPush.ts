/**
 * Commands answered before the client is loaded (Effect, the HTTP client and
 * the API schemas cost more start-up time than the whole answer), when the working tree is exactly the
 * branch head as the index records it (`treeUnchanged`), or for status only files of the index changed:
 * - `grove push` with nothing to push: the branch is on the server at its local head, no metadata is
 *   pending;
 * - `grove status`: no change to list, or only changed files of the index to list (the full command's scan takes
 *   the same path and writes nothing).
 * Anything else, or any doubt (a broken file, a merge in progress, flags other than --json), returns
 * undefined and the full command runs; it reaches the same answer the slow way when there is one.
 * A small push (SmallPush.ts) is sent from here too. No Effect here (nor in what it imports).
 */
import type { FileChange } from "@grove/core/objects/FileChanges"
import * as fs from "node:fs"
import * as path from "node:path"
import { chooseRemote, normaliseRemote } from "./Remote.ts"
import type { BranchState, RepoState } from "./local/State.ts"
import { statusReport } from "./local/StatusReport.ts"
import type { WorkIndex } from "./local/TreeStatus.ts"
import { columnsChanged, indexColumns, keepPass, readIndexSync, treeUnchanged } from "./local/TreeStatus.ts"
import type { FullCheck } from "./watch/WatchClient.ts"
import { socketPath } from "./watch/WatchPaths.ts"

/** How bin/start.js prints an answer (Stdout.ts). */
export { writeStdout } from "./Stdout.ts"

const readJson = (file: string): unknown => {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"))
  } catch {
    return undefined
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The nearest directory at or above `cwd` with a `.grove/config.json` (never `home`, whose `.grove` holds credentials);
 * none past a `.grove` without it, which may be an unfinished clone (Checkout.findCheckout: the full command says so).
 */
const checkoutRoot = (cwd: string, home: string): { readonly root: string; readonly config: unknown } | undefined => {
  const homeDir = path.resolve(home)
  for (let dir = path.resolve(cwd); ; dir = path.dirname(dir)) {
    if (dir !== homeDir) {
      const file = path.join(dir, ".grove", "config.json")
      if (fs.existsSync(file)) return { root: dir, config: readJson(file) }
      if (fs.existsSync(path.join(dir, ".grove"))) return undefined
    }
    if (path.dirname(dir) === dir) return undefined
  }
}

export interface NoopPushInput {
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  readonly home: string
}

/** The command's words are exactly `command`, with or without `--json`. */
const commandIs = (args: ReadonlyArray<string>, command: string) => args.filter((a) => a !== "--json").join(" ") === command

const optionalString = (value: unknown) => value === undefined || typeof value === "string"

/** A checkout as `readCheckout` found it. */
export interface CheckoutFound {
  readonly root: string
  readonly remote: string
  /** The key stored in the checkout's config. */
  readonly key: string | undefined
  readonly repository: { readonly owner: string; readonly name: string } | undefined
  readonly state: RepoState
  readonly branch: BranchState & { readonly head: string }
}

/**
 * The checkout at or above `cwd` (its config as the full command's schema takes it), with its state
 * and current branch when no merge is in progress; undefined at any doubt.
 */
const readCheckout = ({ cwd, env, home }: NoopPushInput): CheckoutFound | undefined => {
  if ("error" in chooseRemote(undefined, env)) return undefined // the full command reports it
  const found = checkoutRoot(cwd, home)
  if (found === undefined || !isRecord(found.config)) return undefined
  const { key, name, owner, remote } = found.config
  if (typeof remote !== "string" || !optionalString(owner) || !optionalString(name) || !optionalString(key)) return undefined
  const state = readJson(path.join(found.root, ".grove", "state.json"))
  if (!isRecord(state) || state["version"] !== 1 || state["merge"] !== undefined || !isRecord(state["branches"])) return undefined
  const branch = state["branches"][String(state["branch"])]
  if (!isRecord(branch) || typeof branch["name"] !== "string" || typeof branch["head"] !== "string") return undefined
  if (!Array.isArray(branch["unpushed"])) return undefined
  return {
    root: found.root,
    remote,
    key: typeof key === "string" ? key : undefined,
    repository: typeof owner === "string" && typeof name === "string" ? { owner, name } : undefined,
    state: state as unknown as RepoState,
    branch: branch as unknown as BranchState & { readonly head: string }
  }
}

/** Files from which the check below runs without V8's optimizing compiler (loading node:v8 costs ~3 ms). */
const MANY_FILES = 5_000

/**
 * `check` of the tree at `root`, given it as "." with the process in `root`: each stat's path is then shorter by the
 * root's, for the kernel to look up and for Node to copy (20k files: ~5 ms less CPU). Nothing else runs meanwhile (the
 * check is synchronous), and the directory is given back after. With `files` at least MANY_FILES, V8's optimizing
 * compiler (TurboFan) is off meanwhile: its compiles of the stat loop cost more CPU than they save in a run that ends
 * right after (20k: ~8 ms less CPU); on again after, for a full command that follows (hashing, a clone).
 */
const statsFromRoot = <A>(root: string, files: number, check: (root: string) => A): A => {
  const v8 = files < MANY_FILES ? undefined : process.getBuiltinModule("node:v8")
  const cwd = process.cwd()
  v8?.setFlagsFromString("--no-turbofan")
  process.chdir(root)
  try {
    return check(".")
  } finally {
    process.chdir(cwd)
    v8?.setFlagsFromString("--turbofan")
  }
}

/** TreeStatus.columnsChanged with ctimes, from the checkout's root, up to `limit` changed files. */
const statPass = (root: string, index: WorkIndex, limit = Infinity) =>
  statsFromRoot(root, indexColumns(index)?.paths.length ?? 0, (at) => columnsChanged(at, index, true, limit))

/**
 * The full check of "the tree is exactly the index", settled when the index's columns and every directory show it
 * (TreeStatus.columnsUnchanged with ctimes: the full command's scan would write nothing); with `settledOnly`, only
 * a settled "same" counts (status and the small push: their full commands must leave the index as it is). With
 * `handOver` (no watcher: the scan's stats need no token taken first), a check that finds changes goes on through every
 * file, and the full command that follows takes its stats instead of having every file stat-ed again
 * (TreeStatus.keepPass).
 */
const fullCheck = (root: string, index: WorkIndex, settledOnly: boolean, handOver: boolean): FullCheck => {
  const found = statPass(root, index, handOver ? Infinity : 1)
  if (handOver && found !== undefined && found.changed.length > 0) keepPass(root, index, found)
  // A hard-linked file can change with no event here (written through its other name): never worth a token.
  if (found !== undefined || settledOnly) {
    const same = found?.changed.length === 0
    return { same, settled: same && found?.linked === false }
  }
  return { same: treeUnchanged(root, index), settled: false }
}

/**
 * Whether the tree at `root` is exactly its index and the index's base is `head` (see fullCheck). With the checkout's
 * watcher running (`grove watch`, watch/WatchClient.ts; its client, with node:net, is loaded only when its socket is
 * there), a look first: nothing changed since the last token for this very index file answers it without parsing the
 * index; otherwise only the paths changed since are stat-ed, or, at any doubt, every file. False at any error.
 */
export const treeIsHead = (root: string, head: string, settledOnly: boolean): boolean | Promise<boolean> => {
  const indexAtHead = () => {
    const index = readIndexSync(root)
    return index.base === head ? index : undefined
  }
  if (!fs.existsSync(socketPath(root))) {
    const index = indexAtHead()
    return index !== undefined && fullCheck(root, index, settledOnly, true).same
  }
  return import("./watch/WatchClient.ts").then(async (m) => {
    const seen = await m.look(root)
    if (seen?.quiet === true) return seen.base === head
    const index = indexAtHead()
    if (index === undefined) return false
    if (seen === undefined) return fullCheck(root, index, settledOnly, false).same
    return (await m.treeUnchangedWatched(root, index, () => fullCheck(root, index, settledOnly, false), seen)).same
  }).catch(() => false)
}

/** `f` of a value, or of a promise's. */
const andThen = <A, B>(value: A | Promise<A>, f: (a: A) => B): B | Promise<B> => value instanceof Promise ? value.then(f) : f(value)

/**
 * What `grove push` prints when there is provably nothing to push, or (a promise of it) when the push is small
 * enough for `SmallPush.ts`; else undefined.
 */
export const noopPush = (input: NoopPushInput): string | undefined | Promise<string | undefined> => {
  if (!commandIs(input.args, "push")) return undefined
  const found = readCheckout(input)
  if (found === undefined || found.repository === undefined) return undefined
  const { branch, root } = found
  const head = branch.head
  if (branch.name === "main" || branch.description_pending === true || branch.close_pending === true) return undefined
  if (branch.remote_head !== head || branch.unpushed.length > 0) {
    // A first push (nothing of the branch on the server yet) is never small (SmallPush.ts): the full command at once.
    if (branch.remote_head === null) return undefined
    // Loaded only for it: the no-op push and status need none of the sending.
    return import("./SmallPush.ts").then(
      (m) => m.smallPush(found, () => treeIsHead(root, head, true), input.args.includes("--json"), input.env, input.home),
      () => undefined
    )
  }
  const answer = input.args.includes("--json")
    ? JSON.stringify(
      { branch: branch.name, head, pushed_commits: 0, uploaded_chunks: 0, uploaded_bytes: 0, sent_bytes: 0, created_repository: false },
      null,
      2
    )
    : `Already up to date (${branch.name}).`
  return andThen(treeIsHead(root, head, false), (same) => same ? answer : undefined)
}

/**
 * What `grove status` prints when the working tree is the head as the index records it, else undefined.
 * Only when the index's columns and every directory show it (the full command's scan then takes the same
 * fast path and leaves the index as it is); a tree told unchanged only by a walk goes to the full
 * command, which records its directories for next time.
 */
export const quickStatus = (input: NoopPushInput): string | undefined | Promise<string | undefined> => {
  if (!commandIs(input.args, "status")) return undefined
  const found = readCheckout(input)
  // Without GROVE_REMOTE the full command checks the checkout's server address.
  if (found === undefined || ((input.env["GROVE_REMOTE"] ?? "") === "" && normaliseRemote(found.remote) === undefined)) return undefined
  // Files withheld by path permissions (local/Withheld.ts) make the full command compare with the head commit.
  if (fs.existsSync(path.join(found.root, ".grove", "withheld.json"))) return undefined
  return andThen(headChanges(found.root, found.branch.head), (changes) => {
    if (changes === undefined) return undefined
    const report = statusReport({ ...found, merge: undefined, changes, invalid: [] })
    return input.args.includes("--json") ? JSON.stringify(report.value, null, 2) : report.human()
  })
}

/**
 * The working tree's changes against `head` as the full `grove status` finds them: none when the tree is settled as
 * the index (treeIsHead); without a watcher, also when the stat pass finds only files of the index changed and every
 * directory as recorded (EditedFiles.ts). Undefined when the full command must decide; it then takes the stat pass.
 */
const headChanges = (root: string, head: string): ReadonlyArray<FileChange> | undefined | Promise<ReadonlyArray<FileChange> | undefined> => {
  if (fs.existsSync(socketPath(root))) return andThen(treeIsHead(root, head, true), (same) => same ? [] : undefined)
  const index = readIndexSync(root)
  if (index.base !== head) return undefined
  const found = statPass(root, index)
  if (found === undefined) return undefined
  if (found.changed.length === 0) return []
  keepPass(root, index, found)
  // Loaded only then (BLAKE3, its native addon): the no-op push and an unchanged status hash nothing.
  return import("./local/EditedFiles.ts").then((m) => m.editedFiles(root, index, found), () => undefined)
}
