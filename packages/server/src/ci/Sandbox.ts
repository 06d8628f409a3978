/**
 * Where CI steps run: each step in its own bubblewrap (`bwrap`) sandbox. New user, PID, IPC, UTS,
 * cgroup and network namespaces; a fresh root holding only the system read-only (/usr, /etc and the
 * /bin, /lib… links), a private /proc, /dev and /tmp, and the job's checkout read-write at its own
 * path. Nothing else of the host is there: not the data directory, not other runs' workspaces, not the
 * server's secret key. PID 1 of the sandbox is bwrap, started with a PATH and the step's environment packed
 * (stepEnvironment: no process before the step's shell reads it; or, for a sandbox started ahead of its step,
 * warmCommand, with a PATH and nothing of any run's); when
 * the step's shell exits or is killed, the PID namespace ends and takes every process in it along (a
 * `setsid` daemon too).
 *
 * Network: with `network: false` the sandbox's namespace has only its own lo. On (the default), bwrap
 * starts inside a namespace that pasta (passt) made and serves: user-mode TCP and UDP through the
 * host's sockets, like slirp. The namespace has an address of its own (10.0.2.15, fd67:726f:7665::2),
 * so the host's own addresses are a way out like any other; no port is forwarded either way and the
 * gateway is not mapped to the host (`--no-map-gw`), so 127.0.0.0/8 and ::1 are the sandbox's own
 * loopback: services bound to the host's loopback only (PostgreSQL, Kafka, MinIO, the server's port)
 * are out of reach. The step has no capability in that namespace (bwrap's user namespace is nested in
 * pasta's), so it cannot reconfigure it. DNS uses the host's /etc/resolv.conf (a loopback resolver
 * there does not answer inside). When the server runs as root, a network-on step mostly joins such a namespace that a
 * pasta already serves (NetnsPool: kept across steps, found clean after each, else retired) instead of starting its own.
 *
 * When the server runs as root, every running job gets its own host uid/gid from a range
 * (`--ci-uid-base`, 65,536 ids) and bwrap (inside pasta, when there) is started as that user (setpriv,
 * supplementary groups cleared), so the user namespaces are unprivileged ones; inside, the step is
 * `--ci-user` (default nobody). Not root: both run as the server's user, still in user namespaces.
 *
 * The dispatcher probes this once at start; without it, it starts no runners unless the operator
 * opted into the old shared runner (`--ci-unsafe-shared-runner`): steps on the host as `--ci-user`.
 */
import { Effect, type Scope } from "effect"
import { execFile, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { constants } from "node:fs"
import { access, readlink } from "node:fs/promises"
import * as path from "node:path"
import { promisify } from "node:util"
import type { NetnsPool } from "./NetnsPool.ts"
import { stepEnvironment, stepShell } from "./StepEnvironment.ts"

const exec = promisify(execFile)

export interface RunUser {
  readonly uid: number
  readonly gid: number
}

export type Isolation =
  | {
    readonly _tag: "Sandboxed"
    readonly bwrap: string
    /** Gives a network-on sandbox its network: own namespace, nothing of the host's loopback. */
    readonly pasta: string
    /** Set when the server runs as root: each job is started as its own uid through it. */
    readonly setpriv: string | undefined
    readonly uidBase: number
    /** Who the step is inside the sandbox (`--ci-user`). */
    readonly inside: RunUser
    /** Root only: network namespaces kept across steps (NetnsPool), entered with nsenter instead of a pasta per step. */
    readonly netns?: { readonly pool: NetnsPool; readonly nsenter: string } | undefined
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
export const jobUser = (isolation: Isolation): Effect.Effect<RunUser | undefined, never, Scope.Scope> =>
  Effect.acquireRelease(Effect.sync(() => reserveUser(isolation)), (user) => Effect.sync(() => releaseUser(user)))

/** jobUser without a scope (a warm sandbox holds its user until its job ends): give it back with releaseUser. */
export const reserveUser = (isolation: Isolation): RunUser | undefined => {
  if (isolation._tag === "Shared") return isolation.user
  if (isolation.setpriv === undefined) return undefined
  return reserveId(isolation.uidBase)
}

/** A host uid (= gid) of the range from `base` no one holds; give it back with releaseUser. */
export const reserveId = (base: number): RunUser => {
  let id = base + Math.floor(Math.random() * UID_RANGE)
  while (inUse.has(id)) id = base + ((id - base + 1) % UID_RANGE)
  inUse.add(id)
  return { uid: id, gid: id }
}

export const releaseUser = (user: RunUser | undefined) => {
  if (user !== undefined) inUse.delete(user.uid)
}

export interface Command {
  readonly file: string
  readonly args: ReadonlyArray<string>
  /** For the spawner to switch to, when setpriv is not there to do it (shared runner only). */
  readonly user?: RunUser | undefined
  /**
   * Network on: what the shell between pasta and bwrap prints to the terminal once bwrap has ended,
   * then the exit code and BEL. The step's exit is known then, after all its output, not only once
   * pasta has exited (the kernel's teardown of its tap device and namespace, 10-40 ms later).
   */
  readonly exitMarker?: string | undefined
  /** Told the process's exit (its whole sandbox gone): gives back the pooled namespace it ran in. */
  readonly released?: ((exit: { readonly exitCode: number; readonly signal: number }) => void) | undefined
}

const SYSTEM_LINKS = ["/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin"]

/**
 * pasta for a network-on sandbox: configure the namespace, no port forwarded in (-t, -u) or out to the
 * host's ports (-T, -U: their `auto` default would carry 127.0.0.1:port to the host's loopback), the
 * gateway not mapped to the host, and addresses of its own instead of copies of the host's (with
 * those, a step reaching for the host's address would reach itself).
 */
export const PASTA_ARGS = [
  "--config-net", "--quiet", "--no-map-gw", "-t", "none", "-u", "none", "-T", "none", "-U", "none",
  "-a", "10.0.2.15", "-n", "24", "-g", "10.0.2.2", "-a", "fd67:726f:7665::2", "-g", "fd67:726f:7665::1"
]

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

/** bwrap around `argv`, inside pasta's network namespace when the network is on. */
const sandboxed = (
  tools: { readonly bwrap: string; readonly pasta: string },
  inside: RunUser,
  workspace: string | undefined,
  network: boolean,
  links: ReadonlyMap<string, string>,
  argv: ReadonlyArray<string>,
  marker = newMarker()
): Array<string> => {
  const bwrap = [tools.bwrap, ...bwrapArgs(inside, workspace, network, links), "--", ...argv]
  return network ? [tools.pasta, ...PASTA_ARGS, "--", ...reportingExit(marker, bwrap)] : bwrap
}

/**
 * `argv`, then the marker and its exit code printed, then that code as the shell's own. The sandbox's
 * processes are all gone when bwrap (outside its PID namespace) returns, so the marker comes after
 * every byte of theirs; they cannot print it early, for they never see its random part (not in their
 * /proc, environment or terminal input).
 */
const reportingExit = (marker: string, argv: ReadonlyArray<string>): Array<string> =>
  ["/bin/sh", "-c", `"$@"; code=$?; printf '%s%d\\007' "$0" "$code"; exit "$code"`, marker, ...argv]

/** A new exit marker: an OSC sequence no terminal acts on, with a random part. */
const newMarker = () => `\x1b]grove-exit;${randomBytes(16).toString("hex")};`

/** `argv` in a sandbox around `workspace` (or, shared, on the host) as `user`. */
export const inSandbox = (isolation: Isolation, user: RunUser | undefined, workspace: string, network: boolean, argv: ReadonlyArray<string>): Effect.Effect<Command> =>
  Effect.promise(async () => {
    if (isolation._tag !== "Sandboxed") return asUser(isolation.setpriv, user, argv)
    const links = await readLinks()
    // A pooled namespace: the server's nsenter joins it (as root), then setpriv makes the step the job's user. bwrap's
    // exit is the step's: no pasta around it to wait for.
    const lease = network && user !== undefined && isolation.setpriv !== undefined ? isolation.netns?.pool.take() : undefined
    if (lease !== undefined) {
      const inner = asUser(isolation.setpriv, user, [isolation.bwrap, ...bwrapArgs(isolation.inside, workspace, true, links), "--", ...argv])
      return { file: isolation.netns!.nsenter, args: [`--net=${lease.path}`, "--", inner.file, ...inner.args], released: lease.done }
    }
    const marker = newMarker()
    const command = asUser(isolation.setpriv, user, sandboxed(isolation, isolation.inside, workspace, network, links, argv, marker))
    return network ? { ...command, exitMarker: marker } : command
  })

/**
 * `bash -e -o pipefail -c <run>` for one step, started with stepEnvironment(env): the step's own variables are set only
 * inside the sandbox, after the drop to the job's user, as a warm sandbox's are (StepEnvironment.stepShell).
 */
export const stepCommand = (
  isolation: Isolation,
  user: RunUser | undefined,
  workspace: string,
  network: boolean,
  run: string,
  env: Readonly<Record<string, string>>
): Effect.Effect<Command> =>
  inSandbox(isolation, user, workspace, network, stepShell(env, workspace, run))

/** What a warm sandbox prints once it waits for its step (its terminal then takes input raw, unechoed). */
export const WARM_READY = "grove-sandbox-ready\n"

/**
 * A sandbox started ahead of its step (network on, around `workspace`): bash waits with the terminal
 * raw and unechoed for one line (warmStepLine), restores the terminal, and replaces itself with the
 * step's shell as a cold step's starts: with stepEnvironment's variables instead of its own (WAITING_ENV's), the same
 * argv (stepShell); only SHLVL=0 (exec sets it) and `_` are more in the shell's initial environ, and bash sets both at
 * start. Until then it holds nothing of any run.
 */
export const warmCommand = (isolation: Isolation, user: RunUser | undefined, workspace: string): Effect.Effect<Command> =>
  inSandbox(isolation, user, workspace, true, [
    "/bin/bash", "--noprofile", "--norc", "-c",
    `saved=$(stty -g) && stty raw -echo && printf 'grove-sandbox-ready\\n' && IFS=' ' read -r -a words && stty "$saved" && args=() && ` +
    `for word in "\${words[@]}"; do printf -v arg '%b' "\${word#.}"; args+=("$arg"); done && unset PATH LANG && ` +
    `for ((i = 1; i <= args[0]; i++)); do export "\${args[i]}"; done && exec "\${args[@]:args[0]+1}"`
  ])

/**
 * The line a warm sandbox turns into its step: how many variables, stepEnvironment(env) as `NAME=value`…, then
 * stepShell's argv; each word a dot then every byte as `\xHH`.
 */
export const warmStepLine = (env: Readonly<Record<string, string>>, workspace: string, run: string): string => {
  const hex = (text: string) => Buffer.from(text, "utf8").toString("hex").replace(/../g, "\\x$&")
  const variables = Object.entries(stepEnvironment(env)).map(([name, value]) => `${name}=${value}`)
  const words = [String(variables.length), ...variables, ...stepShell(env, workspace, run)]
  // Each word starts with a dot, so that an empty one is still a word.
  return `${words.map((word) => `.${hex(word)}`).join(" ")}\n`
}

/** Starts `argv` as `user` (uid, gid, supplementary groups cleared), the same way for a pty and for a plain child process. */
const asUser = (setpriv: string | undefined, user: RunUser | undefined, argv: ReadonlyArray<string>): Command =>
  user !== undefined && setpriv !== undefined
    ? { file: setpriv, args: [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--", ...argv] }
    : { file: argv[0]!, args: argv.slice(1), user }

/** The first executable `name` on the server's PATH. */
export const which = async (name: string): Promise<string | undefined> => {
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

/** Runs a probe command; undefined when it succeeded, else what it printed (without pasta's syslog complaints). */
const attempt = (command: Command): Promise<string | undefined> =>
  new Promise((resolve) => {
    // Its own process group, killed once it exits: a pasta that failed to set up leaves a child behind
    // (holding stderr open, so "close" comes only after the kill).
    const child = spawn(command.file, [...command.args], { env: { PATH: "/usr/bin:/bin" }, timeout: 20_000, detached: true, stdio: ["ignore", "ignore", "pipe"] })
    let stderr = ""
    let status = ""
    child.stderr.on("data", (chunk) => (stderr += String(chunk)))
    child.on("error", (error) => resolve(error.message))
    child.on("exit", (code, signal) => {
      status = code === 0 ? "" : `exit ${code ?? signal}`
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // Nothing left.
      }
    })
    child.on("close", () =>
      resolve(
        status === "" ? undefined : stderr.split("\n").filter((line) => !/^Failed to send \d+ bytes to syslog/.test(line)).join("\n").trim() || status
      ))
  })

/**
 * Runs a trivial sandbox twice, the ways steps will run (as a job uid when root): without network and
 * with pasta's. Answers the isolation to use, or a reason why there is none.
 */
export const probe = (settings: SandboxSettings, bwrapName = "bwrap", pastaName = "pasta"): Effect.Effect<
  { readonly _tag: "Ready"; readonly isolation: Isolation } | { readonly _tag: "Unavailable"; readonly reason: string }
> =>
  Effect.promise(async () => {
    const inside = await lookupUser(settings.runAsUser)
    const root = process.getuid?.() === 0
    const setpriv = root ? await which("setpriv") : undefined
    if (root && setpriv === undefined) return { _tag: "Unavailable", reason: "setpriv (util-linux) is not on the PATH" } as const
    const bwrap = await which(bwrapName)
    if (bwrap === undefined) return { _tag: "Unavailable", reason: `${bwrapName} (bubblewrap) is not on the PATH` } as const
    const pasta = await which(pastaName)
    if (pasta === undefined) return { _tag: "Unavailable", reason: `${pastaName} (passt) is not on the PATH; steps with the network on need it` } as const
    const probeUser = root ? { uid: settings.uidBase, gid: settings.uidBase } : undefined
    const check = ["/bin/sh", "-c", "test \"$(id -u)\" = \"$1\"", "sh", String(inside.uid)]
    const links = await readLinks()
    const offline = await attempt(asUser(setpriv, probeUser, sandboxed({ bwrap, pasta }, inside, undefined, false, links, check)))
    if (offline !== undefined) return { _tag: "Unavailable", reason: `${bwrap} could not start a sandbox: ${offline}` } as const
    const online = await attempt(asUser(setpriv, probeUser, sandboxed({ bwrap, pasta }, inside, undefined, true, links, check)))
    if (online !== undefined) {
      return { _tag: "Unavailable", reason: `${pasta} could not give a sandbox its own network (a default route and a /dev/net/tun all may open are needed): ${online}` } as const
    }
    return { _tag: "Ready", isolation: { _tag: "Sandboxed", bwrap, pasta, setpriv, uidBase: settings.uidBase, inside } } as const
  })

/** The shared runner's isolation (the old behaviour): steps on the host as `--ci-user` when root. */
export const sharedRunner = (settings: SandboxSettings): Effect.Effect<Isolation> =>
  Effect.promise(async () => {
    const root = process.getuid?.() === 0
    return { _tag: "Shared", setpriv: root ? await which("setpriv") : undefined, user: root ? await lookupUser(settings.runAsUser) : undefined } as const
  })
