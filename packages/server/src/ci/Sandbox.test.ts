import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { greeter, hostAddress, type Listener } from "../../../../test/support/hostNetwork.ts"
import { type Isolation, jobUser, probe, stepCommand, UID_RANGE } from "./Sandbox.ts"
import { RUNNER_LANG, stepEnvironment, unpacksInShell } from "./StepEnvironment.ts"

const exec = promisify(execFile)
const settings = { runAsUser: "nobody", uidBase: 200_000, unsafeSharedRunner: false }
const root = process.getuid?.() === 0

const ready = async (): Promise<Isolation> => {
  const found = await Effect.runPromise(probe(settings))
  if (found._tag !== "Ready") throw new Error(`no sandbox on this machine: ${found.reason}`)
  return found.isolation
}

/** Runs one step command the way the runner would (without the terminal), in a fresh workspace. */
const runIn = async (
  isolation: Isolation,
  network: boolean,
  script: string,
  envIn: (workspace: string) => Record<string, string> = () => ({ PATH: "/usr/bin:/bin", STEP_ONLY: "yes" })
) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const user = yield* jobUser(isolation)
    const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "grove-sandbox-test-"))
    fs.writeFileSync(path.join(workspace, "mine.txt"), "in the checkout\n")
    if (user !== undefined) fs.chownSync(workspace, user.uid, user.gid)
    if (user !== undefined) fs.chownSync(path.join(workspace, "mine.txt"), user.uid, user.gid)
    const env = envIn(workspace)
    const command = yield* stepCommand(isolation, user, workspace, network, script, env)
    return yield* Effect.promise(() =>
      exec(command.file, [...command.args], { cwd: workspace, env: stepEnvironment(env) })
        // Network on, the shell around bwrap prints the exit marker last (what StepProcess reads from the terminal).
        .then(({ stdout }) => ({
          stdout: command.exitMarker === undefined ? stdout : withoutMarker(stdout, command.exitMarker),
          workspace,
          ownShell: unpacksInShell(env, workspace),
          shells: command.args.filter((arg) => arg === "/bin/bash").length
        }))
        .finally(() => fs.rmSync(workspace, { recursive: true, force: true }))
    )
  })))

const withoutMarker = (stdout: string, marker: string) => {
  expect(stdout.endsWith(`${marker}0\x07`)).toBe(true)
  return stdout.slice(0, stdout.length - marker.length - 2)
}

describe("Sandbox", () => {
  it("reports a missing bubblewrap as unavailable, saying why", async () => {
    const found = await Effect.runPromise(probe(settings, "grove-no-such-bwrap"))
    expect(found).toEqual({ _tag: "Unavailable", reason: "grove-no-such-bwrap (bubblewrap) is not on the PATH" })
  })

  it("reports a missing pasta as unavailable: network-on steps need it", async () => {
    const found = await Effect.runPromise(probe(settings, "bwrap", "grove-no-such-pasta"))
    expect(found).toEqual({ _tag: "Unavailable", reason: "grove-no-such-pasta (passt) is not on the PATH; steps with the network on need it" })
  })

  it("runs a step with only the system, its own /proc, /dev, /tmp and its checkout, as --ci-user inside", async () => {
    const isolation = await ready()
    const script = "echo =id; id -un; echo =nested; unshare -U true 2>/dev/null && echo allowed || echo refused; echo =root; ls -A /; echo =environ; tr '\\0' '\\n' < /proc/1/environ; echo =stepenv; env; echo =pids; ls /proc | grep '^[0-9]'; echo =cwd; pwd; cat mine.txt; echo =tmp; ls -A /tmp"
    const { stdout, workspace } = await runIn(isolation, true, script)
    const sections = Object.fromEntries(stdout.split(/^=/m).filter((part) => part !== "").map((part) => {
      const [name, ...rest] = part.trimEnd().split("\n")
      return [name!, rest]
    }))
    expect(sections.id).toEqual(["nobody"])
    expect(sections.nested).toEqual(["refused"])
    const system = ["bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr"]
    expect(sections.root!.filter((entry: string) => !system.includes(entry))).toEqual([])
    // PID 1 is the sandbox's bwrap, with the step's environment packed (Sandbox.stepEnvironment): nothing of this test
    // process's own. The step has its variables as they are.
    expect(sections.environ).toContain("GROVE_STEP_ENV_STEP_ONLY=yes")
    expect(sections.environ!.some((line: string) => line.startsWith("VITEST"))).toBe(false)
    expect(sections.stepenv).toContain("STEP_ONLY=yes")
    expect(sections.stepenv!.some((line: string) => line.startsWith("GROVE_STEP_ENV_") || line.startsWith("VITEST"))).toBe(false)
    // Its own PID namespace: bwrap, the shell and ls.
    expect(sections.pids!.length).toBeLessThan(6)
    expect(sections.cwd).toEqual([workspace, "in the checkout"])
    // /tmp holds nothing but the way to the checkout.
    expect(sections.tmp).toEqual([workspace.split("/")[2]])
  })

  it("a step's own shell unpacks its variables, and starts as a shell given them would (line numbers, options, $_)", async () => {
    const isolation = await ready()
    // What bash shows of itself; the values that change from one start to the next left out.
    const script = [
      'echo "_=$_ line=$LINENO args=$# $0 $-"',
      'x=é; echo "${#x} $LINENO"',
      'printf "%s\\n" "$BASH_EXECUTION_STRING" | head -n 1',
      "declare -p | grep -v -E '^declare -[a-zA-Z-]* (BASHPID|RANDOM|SRANDOM|SECONDS|EPOCH|PPID|BASH_COMMAND|_=|LINENO|MAILCHECK)'",
      "env | grep -v '^MAILCHECK='",
      "shopt; set -o; pwd; nope-no-such-command || echo $LINENO"
    ].join("\n")
    // As the runner gives them (Runner.baseEnv, PWD), with a value of every kind.
    const plain = (workspace: string) => ({
      PATH: "/usr/local/bin:/usr/bin:/bin", HOME: workspace, LANG: RUNNER_LANG, TERM: "xterm", CI: "true", PWD: workspace,
      QUOTED: "a b'\"$(no) `no`\nsecond line", EMPTY: "", _lower: "1"
    })
    const own = await runIn(isolation, false, script, plain)
    // MAILCHECK (bash reads it at start) makes a shell of its own unpack them first, as before: the reference.
    const before = await runIn(isolation, false, script, (workspace) => ({ ...plain(workspace), MAILCHECK: "60" }))
    expect([own.ownShell, own.shells]).toEqual([true, 1])
    expect([before.ownShell, before.shells]).toEqual([false, 2])
    const same = (stdout: string, workspace: string) => stdout.replaceAll(workspace, "<workspace>")
    expect(same(own.stdout, own.workspace)).toBe(same(before.stdout, before.workspace))
    expect(own.stdout.split("\n").slice(0, 3)).toEqual(["_=/bin/bash line=1 args=0 /bin/bash ehBc", "1 2", 'echo "_=$_ line=$LINENO args=$# $0 $-"'])
    expect(own.stdout).toContain("\nQUOTED=a b'\"$(no) `no`\nsecond line\n")
    expect(own.stdout).not.toContain("GROVE_STEP_ENV_")
  })

  it("a step's first line is parsed in the runner's locale, as a shell given the step's variables would parse it", async () => {
    const isolation = await ready()
    // bash decodes $'\u…' as it parses, and it parses the whole first line (the prelude's too) before running any of it;
    // a compound command from line 1 is parsed whole too.
    const script = "echo $'\\u00e9' line1\nif true; then\n  echo $'\\u00e8' compound\nfi\necho $'\\u00ea' line4"
    const env = (workspace: string) => ({ PATH: "/usr/bin:/bin", HOME: workspace, LANG: RUNNER_LANG, PWD: workspace })
    for (const network of [false, true]) {
      const own = await runIn(isolation, network, script, env)
      const before = await runIn(isolation, network, script, (workspace) => ({ ...env(workspace), MAILCHECK: "60" }))
      expect([own.ownShell, own.shells, before.ownShell, before.shells]).toEqual([true, 1, false, 2])
      expect(own.stdout).toBe("é line1\nè compound\nê line4\n")
      expect(own.stdout).toBe(before.stdout)
    }
    // Another LANG is the workflow's: the processes before the drop do not get it, so a shell of its own unpacks it.
    const other = await runIn(isolation, false, "echo $'\\u00e9' $LANG", (workspace) => ({ ...env(workspace), LANG: "C" }))
    expect([other.ownShell, other.stdout]).toEqual([false, "\\u00E9 C\n"])
  })

  it("unpacks in a shell of its own the variables bash or the C library reads at start", () => {
    const env = { PATH: "/usr/bin:/bin", PWD: "/" }
    expect(unpacksInShell(env, "/")).toBe(true)
    for (const name of ["LD_PRELOAD", "LD_LIBRARY_PATH", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "LC_ALL", "BASH_ENV", "BASH_FUNC_f%%", "SHELLOPTS", "BASHOPTS", "ENV", "POSIXLY_CORRECT", "SHLVL", "UID", "IFS", "PS4", "TZ", "_", "GROVE_STEP_ENV_X", "A-B"]) {
      expect([name, unpacksInShell({ ...env, [name]: "x" }, "/")]).toEqual([name, false])
    }
    // No PATH (bash would keep its own default), a PWD that is not where the shell starts, or not canonical.
    expect(unpacksInShell({ PWD: "/" }, "/")).toBe(false)
    expect(unpacksInShell({ ...env, PWD: "/tmp" }, "/")).toBe(false)
    expect(unpacksInShell({ ...env, PWD: "/tmp/../tmp" }, "/tmp/../tmp")).toBe(false)
    expect(unpacksInShell({ PATH: "/usr/bin" }, "/no/such/dir")).toBe(true)
    // LANG: the runner's own only.
    expect(unpacksInShell({ ...env, LANG: RUNNER_LANG }, "/")).toBe(true)
    expect(unpacksInShell({ ...env, LANG: "C" }, "/")).toBe(false)
    expect(stepEnvironment({ LANG: RUNNER_LANG, A: "1" })).toEqual({ PATH: "/usr/bin:/bin", LANG: RUNNER_LANG, GROVE_STEP_ENV_LANG: RUNNER_LANG, GROVE_STEP_ENV_A: "1" })
    expect(stepEnvironment({ LANG: "x/../y", A: "1" })).toEqual({ PATH: "/usr/bin:/bin", GROVE_STEP_ENV_LANG: "x/../y", GROVE_STEP_ENV_A: "1" })
  })

  it("cuts the network with network: false only", async () => {
    const isolation = await ready()
    expect((await runIn(isolation, true, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort")).stdout.trim().split("\n").length).toBeGreaterThan(1)
    expect((await runIn(isolation, false, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")).stdout.trim()).toBe("lo")
  })

  it("with the network on, reaches the host's own address but nothing on the host's loopback", async () => {
    const isolation = await ready()
    const address = hostAddress()
    // pasta needs an external interface, so a machine where the probe passed has one.
    expect(address).toBeDefined()
    const greeting = `hello-${process.pid}-${Date.now()}`
    const listeners: Array<Listener> = [await greeter(address!, greeting), await greeter("127.0.0.1", greeting)]
    // ::1 where the host has IPv6.
    const v6 = await greeter("::1", greeting).catch(() => undefined)
    if (v6 !== undefined) listeners.push(v6)
    try {
      const script = listeners.map(({ host, port }) =>
        `echo "${host} $(timeout 3 bash -c 'exec 3<>/dev/tcp/${host}/${port} && head -n1 <&3' 2>/dev/null || echo unreachable)"`
      ).join("; ")
      const online = (await runIn(isolation, true, script)).stdout.trim().split("\n")
      expect(online).toEqual([`${address} ${greeting}`, "127.0.0.1 unreachable", ...(v6 === undefined ? [] : ["::1 unreachable"])])
      const offline = (await runIn(isolation, false, script)).stdout.trim().split("\n")
      expect(offline).toEqual(listeners.map(({ host }) => `${host} unreachable`))
    } finally {
      for (const listener of listeners) await listener.close()
    }
  })

  it.runIf(root)("gives each job its own host uid in the range, started through setpriv without groups", async () => {
    const isolation = await ready()
    const [a, b] = await Effect.runPromise(Effect.scoped(Effect.all([jobUser(isolation), jobUser(isolation)])))
    expect(a!.uid).not.toBe(b!.uid)
    for (const user of [a!, b!]) expect(user.uid - 200_000).toBeGreaterThanOrEqual(0)
    for (const user of [a!, b!]) expect(user.uid - 200_000).toBeLessThan(UID_RANGE)
    const command = await Effect.runPromise(stepCommand(isolation, a, "/w", false, "true", {}))
    expect(command.file).toMatch(/setpriv$/)
    expect(command.args.slice(0, 3)).toEqual([`--reuid=${a!.uid}`, `--regid=${a!.gid}`, "--clear-groups"])
    expect(command.args).toContain("--unshare-net")
    expect(command.args).toContain("--die-with-parent")
    expect(command.args.some((arg) => arg.endsWith("pasta"))).toBe(false)
    // Network on: bwrap inside pasta's namespace (none of the host's), as the job's uid too.
    const online = await Effect.runPromise(stepCommand(isolation, a, "/w", true, "true", {}))
    expect(online.args.slice(0, 4)).toEqual([`--reuid=${a!.uid}`, `--regid=${a!.gid}`, "--clear-groups", "--"])
    expect(online.args[4]).toMatch(/pasta$/)
    expect(online.args).toContain("--no-map-gw")
    expect(online.args).not.toContain("--unshare-net")
    expect(online.args).not.toContain("--share-net")
  })
})
