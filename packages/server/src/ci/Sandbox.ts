/**
 * Where CI steps run: each step in its own bubblewrap (`bwrap`) sandbox. New user, PID, IPC, UTS and
 * cgroup namespaces (and a new network namespace when the job sets `network: false`); a fresh root
 * holding only the system read-only (/usr, /etc and the /bin, /lib… links), a private /proc, /dev and
 * /tmp, and the job's checkout read-write at its own path. Nothing else of the host is there: not the
 * data directory, not other runs' workspaces, not the server's secret key. PID 1 of the sandbox is
 * bwrap, started with the step's environment only; when the step's shell exits or is killed, the PID
 * namespace ends and takes every process in it along (a `setsid` daemon too).
 *
 * When the server runs as root, every running job gets its own host uid/gid from a range
 * (`--ci-uid-base`, 65,536 ids) and bwrap is started as that user (setpriv, supplementary groups
 * cleared), so the user namespace is an unprivileged one; inside, the step is `--ci-user` (default
 * nobody). Not root: bwrap runs as the server's user, still inside a user namespace.
 *
 * The dispatcher probes this once at start; without it, it starts no runners unless the operator
 * opted into the old shared runner (`--ci-unsafe-shared-runner`): steps on the host as `--ci-user`.
 */
import { Effect, type Scope } from "effect"
import { execFile } from "node:child_process"
import { constants } from "node:fs"
import { access, readlink } from "node:fs/promises"
import * as path from "node:path"
import { promisify } from "node:util"

const exec = promisify(execFile)

export interface RunUser {
  readonly uid: number
  readonly gid: number
}

export type Isolation =
  | {
    readonly _tag: "Sandboxed"
    readonly bwrap: string
    /** Set when the server runs as root: each job is started as its own uid through it. */
    readonly setpriv: string | undefined
    readonly uidBase: number
    /** Who the step is inside the sandbox (`--ci-user`). */
    readonly inside: RunUser
  }
  | {
    /** `--ci-unsafe-shared-runner` without a working sandbox: steps run on the host. */
    readonly _tag: "Shared"
    readonly setpriv: string | undefined
    /** `--ci-user` when the server runs as root. */
    readonly user: RunUser | undefined
  }

export interface SandboxSettings {
  readonly runAsUser: string
  readonly uidBase: number
  readonly unsafeSharedRunner: boolean
}

/** Host ids a job may take: base .. base + UID_RANGE - 1. */
export const UID_RANGE = 65_536
const inUse = new Set<number>()

/**
 * A host uid (= gid) of its own for one job while the scope lasts; undefined when the server is not
 * root. Picked at random in the range, so that nodes sharing a host rarely pick the same one.
 */
export const jobUser = (isolation: Isolation): Effect.Effect<RunUser | undefined, never, Scope.Scope> => {
  if (isolation._tag === "Shared") return Effect.succeed(isolation.user)
  if (isolation.setpriv === undefined) return Effect.succeed(undefined)
  const base = isolation.uidBase
  return Effect.acquireRelease(
    Effect.sync(() => {
      let id = base + Math.floor(Math.random() * UID_RANGE)
      while (inUse.has(id)) id = base + ((id - base + 1) % UID_RANGE)
      inUse.add(id)
      return { uid: id, gid: id }
    }),
    (user) => Effect.sync(() => inUse.delete(user.uid))
  )
}

export interface Command {
  readonly file: string
  readonly args: ReadonlyArray<string>
  /** For the spawner to switch to, when setpriv is not there to do it (shared runner only). */
  readonly user?: RunUser | undefined
}

const SYSTEM_LINKS = ["/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin"]

/** The bwrap arguments for a sandbox around `workspace` (none: only the system, for the probe). */
const bwrapArgs = (inside: RunUser, workspace: string | undefined, network: boolean, links: ReadonlyMap<string, string>): Array<string> => {
  const args = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
  if (!network) args.push("--unshare-net")
  // No nested user namespaces: the usual way from an unprivileged sandbox to the kernel's less-trodden paths.
  args.push("--disable-userns", "--die-with-parent", "--hostname", "grove-ci", "--uid", String(inside.uid), "--gid", String(inside.gid))
  args.push("--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc")
  // Merged-/usr hosts have /bin -> usr/bin and the like: the same links; older ones have directories.
  for (const dir of SYSTEM_LINKS) {
    const target = links.get(dir)
    if (target !== undefined) args.push("--symlink", target, dir)
    else args.push("--ro-bind-try", dir, dir)
  }
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
  if (workspace !== undefined) args.push("--bind", workspace, workspace, "--chdir", workspace)
  return args
}

/** The host's /bin-style links, read once. */
let systemLinks: Map<string, string> | undefined
const readLinks = async (): Promise<Map<string, string>> => {
  if (systemLinks !== undefined) return systemLinks
  const links = new Map<string, string>()
  for (const dir of SYSTEM_LINKS) {
    const target = await readlink(dir).catch(() => undefined)
    if (target !== undefined) links.set(dir, target)
  }
  systemLinks = links
  return links
}

/** `argv` in a sandbox around `workspace` (or, shared, on the host) as `user`. */
export const inSandbox = (isolation: Isolation, user: RunUser | undefined, workspace: string, network: boolean, argv: ReadonlyArray<string>): Effect.Effect<Command> =>
  Effect.promise(async () => {
    const inner = isolation._tag === "Sandboxed"
      ? [isolation.bwrap, ...bwrapArgs(isolation.inside, workspace, network, await readLinks()), "--", ...argv]
      : argv
    return asUser(isolation.setpriv, user, inner)
  })

/** `bash -e -o pipefail -c <run>` for one step. */
export const stepCommand = (isolation: Isolation, user: RunUser | undefined, workspace: string, network: boolean, run: string): Effect.Effect<Command> =>
  inSandbox(isolation, user, workspace, network, ["/bin/bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", run])

/** Starts `argv` as `user` (uid, gid, supplementary groups cleared), the same way for a pty and for a plain child process. */
const asUser = (setpriv: string | undefined, user: RunUser | undefined, argv: ReadonlyArray<string>): Command =>
  user !== undefined && setpriv !== undefined
    ? { file: setpriv, args: [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--", ...argv] }
    : { file: argv[0]!, args: argv.slice(1), user }

/** The first executable `name` on the server's PATH. */
const which = async (name: string): Promise<string | undefined> => {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (dir === "") continue
    const candidate = path.join(dir, name)
    if (await access(candidate, constants.X_OK).then(() => true, () => false)) return candidate
  }
  return undefined
}

/** uid and gid of a user name, from the host's user database. */
const lookupUser = async (name: string): Promise<RunUser> => {
  const uid = Number((await exec("id", ["-u", name]).catch(() => ({ stdout: "" }))).stdout.trim() || Number.NaN)
  const gid = Number((await exec("id", ["-g", name]).catch(() => ({ stdout: "" }))).stdout.trim() || Number.NaN)
  if (!Number.isInteger(uid) || !Number.isInteger(gid) || uid === 0) {
    throw new Error(`the CI user ${name} does not exist (or is root); set --ci-user to an unprivileged user`)
  }
  return { uid, gid }
}

/**
 * Runs a trivial sandbox once, the way steps will run (as a job uid when root). Answers the isolation
 * to use, or a reason why there is none.
 */
export const probe = (settings: SandboxSettings, bwrapName = "bwrap"): Effect.Effect<
  { readonly _tag: "Ready"; readonly isolation: Isolation } | { readonly _tag: "Unavailable"; readonly reason: string }
> =>
  Effect.promise(async () => {
    const inside = await lookupUser(settings.runAsUser)
    const root = process.getuid?.() === 0
    const setpriv = root ? await which("setpriv") : undefined
    if (root && setpriv === undefined) return { _tag: "Unavailable", reason: "setpriv (util-linux) is not on the PATH" } as const
    const bwrap = await which(bwrapName)
    if (bwrap === undefined) return { _tag: "Unavailable", reason: `${bwrapName} (bubblewrap) is not on the PATH` } as const
    const probeUser = root ? { uid: settings.uidBase, gid: settings.uidBase } : undefined
    const argv = [bwrap, ...bwrapArgs(inside, undefined, false, await readLinks()), "--", "/bin/sh", "-c", "test \"$(id -u)\" = \"$1\"", "sh", String(inside.uid)]
    const command = asUser(setpriv, probeUser, argv)
    const failure = await exec(command.file, [...command.args], { env: { PATH: "/usr/bin:/bin" }, timeout: 20_000 }).then(
      () => undefined,
      (error: { stderr?: string; message?: string }) => (error.stderr ?? "").trim() || String(error.message)
    )
    return failure === undefined
      ? { _tag: "Ready", isolation: { _tag: "Sandboxed", bwrap, setpriv, uidBase: settings.uidBase, inside } } as const
      : { _tag: "Unavailable", reason: `${bwrap} could not start a sandbox: ${failure}` } as const
  })

/** The shared runner's isolation (the old behaviour): steps on the host as `--ci-user` when root. */
export const sharedRunner = (settings: SandboxSettings): Effect.Effect<Isolation> =>
  Effect.promise(async () => {
    const root = process.getuid?.() === 0
    return { _tag: "Shared", setpriv: root ? await which("setpriv") : undefined, user: root ? await lookupUser(settings.runAsUser) : undefined } as const
  })
