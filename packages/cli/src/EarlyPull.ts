/**
 * A plain clone's pull, sent by main.ts before Effect and the command's modules load: effect's chunk alone is ~40 ms
 * of CPU at a start, and the pull is the clone's first request, which the server then computes meanwhile. No Effect
 * here (nor in what it imports). `cloneArgs` is the plain clone's parse (Direct.directClone takes the same); the
 * request is the one sync/PullAhead.ts sends (`sendPull`), and the clone takes it as it takes that one's (`takeEarlyPull`):
 * Fetch.pull uses its answer only for the same site, repository, branch and token, so any doubt here costs at most
 * a request, never a different clone. Whenever the server or the credential is not certain without the full
 * command's services (inside a checkout, a credentials file it would warn about), nothing is sent early.
 */
import { checkBranchName, parseFullName } from "@grove/core/Names"
import * as fs from "node:fs"
import * as path from "node:path"
import { chooseRemote, DEFAULT_REMOTE } from "./Remote.ts"
import { lastLoginIn, parseSessions, sessionExpired } from "./SessionFile.ts"
import * as CompactPull from "@grove/core/objects/CompactPull"
import { ACCEPT_ENCODING, askCapabilitiesEarly, COMPRESS_FROM, downloadCompression } from "./sync/BodyCompression.ts"
import { networkTimeouts, sendBytes } from "./sync/HttpSend.ts"
import type { PullAhead } from "./sync/PullAhead.ts"

/** `clone OWNER/NAME [DEST]` with its flags, as Direct.directClone runs it. */
export interface CloneArgs {
  readonly repo: string
  readonly dest: string | undefined
  readonly branch: string | undefined
  readonly remote: string | undefined
  readonly json: boolean
}

/** A flag's value as `--name value` or `--name=value` at `i`: [value, words taken], or undefined when it is not that flag. */
const flagValue = (argv: ReadonlyArray<string>, i: number, name: string): [string | undefined, number] | undefined => {
  const arg = argv[i]!
  if (arg === `--${name}`) {
    const next = argv[i + 1]
    return [next === undefined || next === "" || next.startsWith("-") ? undefined : next, 2]
  }
  if (arg.startsWith(`--${name}=`)) {
    const value = arg.slice(name.length + 3)
    return [value === "" ? undefined : value, 1]
  }
  return undefined
}

/**
 * `argv` as `clone OWNER/NAME [DEST]` with at most one each of `--branch B`, `--remote URL` (also as `--x=value`) and
 * `--json`, the global flags anywhere and `--branch` after `clone`; undefined for anything else (`--help`, another
 * flag, a missing value, a third word), which the command tree parses.
 */
export const cloneArgs = (argv: ReadonlyArray<string>): CloneArgs | undefined => {
  const words: Array<string> = []
  const flags = new Map<string, string>()
  let json = false
  for (let i = 0; i < argv.length;) {
    const arg = argv[i]!
    if (arg === "--json") {
      if (json) return undefined
      json = true
      i += 1
      continue
    }
    if (arg.startsWith("-")) {
      const name = arg.startsWith("--remote") ? "remote" : arg.startsWith("--branch") && words.length > 0 ? "branch" : undefined
      const taken = name === undefined ? undefined : flagValue(argv, i, name)
      if (name === undefined || taken === undefined || taken[0] === undefined || flags.has(name)) return undefined
      flags.set(name, taken[0])
      i += taken[1]
      continue
    }
    words.push(arg)
    i += 1
  }
  if (words[0] !== "clone" || words.length < 2 || words.length > 3) return undefined
  return { repo: words[1]!, dest: words[2], branch: flags.get("branch"), remote: flags.get("remote"), json }
}

/** Whether `cwd` or a folder above it (not `home`) holds a `.grove`: a checkout, whose server and key may apply. */
const inCheckout = (cwd: string, home: string): boolean => {
  const homeDir = path.resolve(home)
  for (let dir = path.resolve(cwd); ; dir = path.dirname(dir)) {
    if (dir !== homeDir && fs.existsSync(path.join(dir, ".grove"))) return true
    if (path.dirname(dir) === dir) return false
  }
}

/** The credentials file's sessions when the full command takes it without a word (see SmallPush); else undefined. */
const readSessions = (home: string) => {
  let fd: number
  try {
    fd = fs.openSync(path.join(home, ".grove", "credentials"), "r")
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? {} : undefined
  }
  try {
    return (fs.fstatSync(fd).mode & 0o077) !== 0 ? undefined : parseSessions(fs.readFileSync(fd, "utf8"))
  } finally {
    fs.closeSync(fd)
  }
}

/** The pull request a clone's RemoteRepo sends (`Fetch.pull` of a whole branch): same URL and headers (Accept too). */
const pullUrl = (site: string, owner: string, name: string, branch: string) =>
  `${site}/api/${encodeURIComponent(owner)}/${encodeURIComponent(name)}/pull?${new URLSearchParams({ branch_name: branch })}`

/**
 * The pull a clone into `root` sends first (Fetch.pull of the whole branch through RemoteRepo: same URL and headers,
 * Accept too), here or through sync/PullAhead.ts once Effect has loaded; undefined (nothing sent) when `root` is not
 * an empty or missing folder, which the clone refuses first.
 */
export const sendPull = async (request: Omit<PullAhead, "answer" | "cancel"> & { readonly root: string }): Promise<PullAhead | undefined> => {
  const { branch, name, owner, root, site, token } = request
  try {
    if (fs.readdirSync(root).length > 0) return undefined
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") return undefined
  }
  // For the chunk requests' hash lists, which go zstd only to another machine (Download.squeezesHashLists).
  if (downloadCompression(site)) askCapabilitiesEarly(site, token, COMPRESS_FROM)
  const headers: Record<string, string> = {}
  if (token !== undefined) headers["authorization"] = `Bearer ${token}`
  if (downloadCompression(site)) headers["accept-encoding"] = ACCEPT_ENCODING
  headers["accept"] = CompactPull.ACCEPT
  const controller = new AbortController()
  const answer = sendBytes(pullUrl(site, owner, name, branch), { method: "GET", headers, signal: controller.signal })
  // Not taken: its failure is nobody's. Once settled there is nothing to stop (its socket may serve another request).
  let settled = false
  answer.then(() => (settled = true), () => (settled = true))
  // The request is written once its connection is made, in a poll phase of the event loop: the module loading that
  // follows would hold it back until it ends. Two turns let a near server's connection complete and the request go.
  await new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)))
  return { site, owner, name, branch, token, answer, cancel: () => settled || controller.abort() }
}

let sent: { readonly args: CloneArgs; readonly cwd: string; readonly ahead: PullAhead } | undefined

export interface EarlyInput {
  readonly argv: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  readonly home: string
}

/**
 * Sends the pull of a plain clone with the server and credential the clone will use (CredentialResolver's order:
 * SERVICE_API_KEY, then the login session for that server), when both are certain outside a checkout; resolves once
 * the request had two turns of the event loop to go out (the module loading that follows would hold it back).
 */
export const sendEarlyPull = async ({ argv, cwd, env, home }: EarlyInput): Promise<void> => {
  try {
    const args = cloneArgs(argv)
    // A bad timeout is refused before anything is sent (Run.ts).
    if (args === undefined || "error" in networkTimeouts(env) || inCheckout(cwd, home)) return
    const parsed = parseFullName(args.repo)
    if (parsed === undefined || (args.branch !== undefined && !checkBranchName(args.branch).ok)) return
    const sessions = readSessions(home)
    if (sessions === undefined) return
    const given = args.remote !== undefined || (env["GROVE_REMOTE"] ?? "") !== ""
    const chosen = chooseRemote(args.remote, env, given ? DEFAULT_REMOTE : lastLoginIn(sessions) ?? DEFAULT_REMOTE)
    if ("error" in chosen) return
    const site = chosen.remote
    const fromEnv = env["SERVICE_API_KEY"]
    const session = sessions[site]
    const token = fromEnv !== undefined && fromEnv !== ""
      ? fromEnv
      : session !== undefined && !sessionExpired(session)
      ? session.token
      : undefined
    const root = path.resolve(cwd, args.dest ?? parsed.name)
    const ahead = await sendPull({ site, owner: parsed.owner, name: parsed.name, branch: args.branch ?? "main", token, root })
    if (ahead !== undefined) sent = { args, cwd, ahead }
  } catch {
    // Any doubt: the clone sends its own.
  }
}

/**
 * The pull sent early for this very clone (`remote` as the clone chose it, the same arguments and folder), taken once;
 * undefined otherwise. One sent for another clone than the one running is stopped.
 */
export const takeEarlyPull = (remote: string, args: CloneArgs, cwd: string): PullAhead | undefined => {
  const early = sent
  sent = undefined
  if (early === undefined) return undefined
  const same = early.ahead.site === remote && early.cwd === cwd && early.args.repo === args.repo && early.args.dest === args.dest &&
    early.args.branch === args.branch
  if (same) return early.ahead
  early.ahead.cancel()
  return undefined
}

/** Stops a pull sent early that no clone took (the command ended before it got there). */
export const dropEarlyPull = (): void => {
  sent?.ahead.cancel()
  sent = undefined
}
