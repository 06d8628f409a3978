/**
 * Child servers for tests and the local cluster (Kafka, Postgres, S3), as scoped resources.
 *
 *   const server = yield* spawnServer({ name: "kafka", command: "java", args, logFile })
 *   yield* server.waitUntil(probe, 60_000)        // or server.waitForLine(l => l.includes("ready"), ms)
 *   // ... the scope's end stops it: SIGTERM, then SIGKILL after `stopTimeoutMs`
 *
 * Orphan guard: the server runs under a small bash guard in its own process group. The
 * guard's stdin is a pipe from this process that is never written to. It reaches EOF when
 * this process asks for a stop (it closes the pipe) or dies in any way, even SIGKILL; the
 * guard then sends the stop signal and, after the grace period, SIGKILL. So no server
 * outlives the Node process that started it, and a normal stop and a crash take one path.
 *
 * Also here: `runCommand` (a short-lived command, e.g. initdb or a format tool), `freePort`,
 * `residentBytes` (RSS from /proc) and `pause` (a real-time sleep).
 *
 * Readiness polling uses real timers: call it from `it.live` / layers, not on a TestClock.
 */
import { Effect, Schema } from "effect"
import type { Scope } from "effect"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"

export class ProcessError extends Schema.TaggedError<ProcessError>()("ProcessError", {
  /** The server's name as given to `spawnServer`, or the command's for `runCommand`. */
  name: Schema.String,
  reason: Schema.Literals(["spawn", "exited", "timeout"]),
  message: Schema.String,
  /** The server's last output lines, to say why it failed. */
  output: Schema.String
}) {}

export interface SpawnServerOptions {
  /** Used in errors and as the guard's process title. */
  readonly name: string
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd?: string | undefined
  /** The whole environment; defaults to this process's. */
  readonly env?: NodeJS.ProcessEnv | undefined
  /** Run as this OS user (the parent must be root), e.g. Postgres refuses to run as root. */
  readonly uid?: number | undefined
  readonly gid?: number | undefined
  /** Sent first on stop; default SIGTERM. */
  readonly stopSignal?: NodeJS.Signals | undefined
  /** SIGKILL follows the stop signal after this long; default 10 s. */
  readonly stopTimeoutMs?: number | undefined
  /** Also write the server's stdout and stderr to this file (truncated at start). */
  readonly logFile?: string | undefined
  /**
   * Deleted (rm -rf) by the guard once the server has ended, so e.g. a temp data dir does not
   * outlive a parent that died abruptly.
   */
  readonly removeAfterExit?: string | undefined
  /** How many output lines to keep in memory; default 200. */
  readonly keepLines?: number | undefined
}

/** `code` is the status the guard's shell reports for the server: 128 + n when signal n killed it. */
export interface ServerExit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface ServerProcess {
  /** The server's own pid (not the guard's). */
  readonly pid: number
  /** The last `lines` lines of stdout and stderr, interleaved. */
  readonly recentOutput: (lines?: number) => string
  /** How the server ended, or `undefined` while it runs. */
  readonly exitStatus: () => ServerExit | undefined
  /** Completes when the server ends (on its own or by the scope's end). */
  readonly awaitExit: Effect.Effect<ServerExit>
  /** Waits for an output line (kept ones count too); fails when the server exits first or the time runs out. */
  readonly waitForLine: (match: (line: string) => boolean, timeoutMs: number) => Effect.Effect<void, ProcessError>
  /** Polls `probe` until it is true; fails when the server exits first or the time runs out. */
  readonly waitUntil: <R>(
    probe: Effect.Effect<boolean, never, R>,
    timeoutMs: number,
    intervalMs?: number
  ) => Effect.Effect<void, ProcessError, R>
}

/*
 * $1 grace seconds, $2 stop signal, $3 a path to delete after the server ends (or ""), then
 * the command. fd 0 is the life line from Node; fd 3 reports the server's pid. The trap
 * also covers a stop signal sent to the guard itself. The killer polls rather than sleeping
 * the whole grace period, so it ends on its own right after the server does.
 */
const GUARD = `
grace=$1; sig=$2; remove=$3; shift 3
exec 5<&0 </dev/null
"$@" 3>&- 5<&- &
pid=$!
echo "$pid" >&3
exec 3>&-
stop() {
  trap '' TERM INT HUP
  kill -s "$sig" "$pid" 2>/dev/null
  {
    for ((i = 0; i < grace * 10; i++)); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
    kill -s KILL "$pid" 2>/dev/null
  } &
}
trap stop TERM INT HUP
{ while read -r _ <&5; do :; done; kill -s TERM $$; } &
watcher=$!
disown $watcher
exec 5<&-
while :; do
  wait "$pid"; rc=$?
  kill -0 "$pid" 2>/dev/null || break
done
kill -s KILL $watcher 2>/dev/null
[ -n "$remove" ] && rm -rf -- "$remove"
exit $rc
`

/** A real-time pause: readiness polling must not depend on a test clock. */
export const pause = (ms: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

const killGroup = (groupId: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-groupId, signal)
  } catch {
    // Already gone.
  }
}

const hasExited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null

/** Resolves with the pid the guard reports on fd 3, or fails when the guard could not start. */
const startGuard = (options: SpawnServerOptions) =>
  Effect.callback<{ child: ChildProcess; pid: number }, ProcessError>((resume) => {
    const fail = (message: string) =>
      resume(Effect.fail(new ProcessError({ name: options.name, reason: "spawn", message, output: "" })))
    const graceSeconds = Math.max(1, Math.ceil((options.stopTimeoutMs ?? 10_000) / 1000))
    const child = spawn(
      "bash",
      [
        "-c",
        GUARD,
        `${options.name}-guard`,
        String(graceSeconds),
        options.stopSignal ?? "SIGTERM",
        options.removeAfterExit ?? "",
        options.command,
        ...options.args
      ],
      {
        cwd: options.cwd,
        env: options.env ?? process.env,
        stdio: ["pipe", "pipe", "pipe", "pipe"],
        detached: true,
        ...(options.uid === undefined ? {} : { uid: options.uid }),
        ...(options.gid === undefined ? {} : { gid: options.gid })
      }
    )
    // The life line is never written; EPIPE after the guard ends is expected.
    child.stdin?.on("error", () => {})
    child.once("error", (error) => fail(`could not start ${options.command}: ${error.message}`))
    let reported = ""
    const pidPipe = child.stdio[3]
    if (pidPipe === null || pidPipe === undefined || !("on" in pidPipe)) return fail("no pid pipe")
    pidPipe.on("data", (data: Buffer) => {
      reported += data.toString("utf8")
    })
    pidPipe.once("close", () => {
      const pid = Number.parseInt(reported.trim(), 10)
      if (Number.isInteger(pid) && pid > 0) resume(Effect.succeed({ child, pid }))
      else fail(`the guard for ${options.command} did not report a pid`)
    })
  })

/** Closes the life line, waits for the server to end, then clears what is left of its group. */
const stopGuard = (child: ChildProcess, stopTimeoutMs: number) =>
  Effect.callback<void>((resume) => {
    const groupId = child.pid as number
    if (hasExited(child)) {
      killGroup(groupId, "SIGKILL")
      return resume(Effect.void)
    }
    // The guard escalates to SIGKILL itself after the grace period; this is the backstop.
    const timer = setTimeout(() => killGroup(groupId, "SIGKILL"), stopTimeoutMs + 2_000)
    child.once("exit", () => {
      clearTimeout(timer)
      // The guard's helpers (a pending `sleep`) share its group.
      killGroup(groupId, "SIGKILL")
      resume(Effect.void)
    })
    child.stdin?.end()
  })

/** Spawns a server under the orphan guard; the scope's end stops it (stop signal, then SIGKILL). */
export const spawnServer = (options: SpawnServerOptions): Effect.Effect<ServerProcess, ProcessError, Scope.Scope> =>
  Effect.acquireRelease(startGuard(options), ({ child }) => stopGuard(child, options.stopTimeoutMs ?? 10_000)).pipe(
    Effect.map(({ child, pid }) => watch(child, pid, options))
  )

const watch = (child: ChildProcess, pid: number, options: SpawnServerOptions): ServerProcess => {
  const keepLines = options.keepLines ?? 200
  const lines: Array<string> = []
  const listeners = new Set<() => void>()
  const notify = () => {
    for (const listener of listeners) listener()
  }
  const log = options.logFile === undefined ? undefined : fs.createWriteStream(options.logFile, { flags: "w" })
  log?.on("error", () => {})
  const collect = () => {
    let partial = ""
    return (data: Buffer) => {
      log?.write(data)
      const parts = (partial + data.toString("utf8")).split("\n")
      partial = parts.pop() ?? ""
      for (const line of parts) {
        lines.push(line)
        if (lines.length > keepLines) lines.shift()
      }
      notify()
    }
  }
  child.stdout?.on("data", collect())
  child.stderr?.on("data", collect())

  let exit: ServerExit | undefined = hasExited(child) ? { code: child.exitCode, signal: child.signalCode } : undefined
  child.once("exit", (code, signal) => {
    exit = { code, signal }
    notify()
  })
  // Output can still arrive between "exit" and "close".
  child.once("close", () => log?.end())

  const recentOutput = (count = 40) => lines.slice(-count).join("\n")
  const describeExit = (e: ServerExit) => (e.signal === null ? `exited with code ${e.code}` : `was killed by ${e.signal}`)
  const exitedError = (e: ServerExit) =>
    new ProcessError({
      name: options.name,
      reason: "exited",
      message: `${options.name} ${describeExit(e)} before it was ready`,
      output: recentOutput()
    })
  const timeoutError = (timeoutMs: number) =>
    new ProcessError({
      name: options.name,
      reason: "timeout",
      message: `${options.name} was not ready after ${timeoutMs} ms`,
      output: recentOutput()
    })

  const awaitExit = Effect.callback<ServerExit>((resume) => {
    const check = () => {
      if (exit === undefined) return
      listeners.delete(check)
      resume(Effect.succeed(exit))
    }
    listeners.add(check)
    check()
    return Effect.sync(() => listeners.delete(check))
  })

  const waitForLine = (match: (line: string) => boolean, timeoutMs: number) =>
    Effect.callback<void, ProcessError>((resume) => {
      const check = () => {
        if (lines.some(match)) return done(Effect.void)
        if (exit !== undefined) return done(Effect.fail(exitedError(exit)))
      }
      const done = (effect: Effect.Effect<void, ProcessError>) => {
        cleanup()
        resume(effect)
      }
      const timer = setTimeout(() => done(Effect.fail(timeoutError(timeoutMs))), timeoutMs)
      const cleanup = () => {
        clearTimeout(timer)
        listeners.delete(check)
      }
      listeners.add(check)
      check()
      return Effect.sync(cleanup)
    })

  const waitUntil = <R>(probe: Effect.Effect<boolean, never, R>, timeoutMs: number, intervalMs = 100) =>
    Effect.gen(function*() {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        if (exit !== undefined) return yield* exitedError(exit)
        if (yield* probe) return
        if (exit !== undefined) return yield* exitedError(exit)
        if (Date.now() > deadline) return yield* timeoutError(timeoutMs)
        yield* pause(intervalMs)
      }
    })

  return { pid, recentOutput, exitStatus: () => exit, awaitExit, waitForLine, waitUntil }
}

export interface RunCommandOptions {
  readonly cwd?: string | undefined
  readonly env?: NodeJS.ProcessEnv | undefined
  readonly uid?: number | undefined
  readonly gid?: number | undefined
  /** Killed (SIGKILL) after this long; default 5 minutes. */
  readonly timeoutMs?: number | undefined
}

/**
 * Runs a short-lived command to completion and returns its stdout and stderr, interleaved.
 * Fails unless it exits with code 0. Interrupting the effect kills the command.
 */
export const runCommand = (
  command: string,
  args: ReadonlyArray<string>,
  options: RunCommandOptions = {}
): Effect.Effect<string, ProcessError> =>
  Effect.callback((resume) => {
    const name = command.split("/").pop() ?? command
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
      ...(options.uid === undefined ? {} : { uid: options.uid }),
      ...(options.gid === undefined ? {} : { gid: options.gid })
    })
    const chunks: Array<Buffer> = []
    child.stdout?.on("data", (data: Buffer) => chunks.push(data))
    child.stderr?.on("data", (data: Buffer) => chunks.push(data))
    const output = () => Buffer.concat(chunks).toString("utf8")
    const tail = () => output().split("\n").slice(-40).join("\n")
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      child.kill("SIGKILL")
    }, options.timeoutMs ?? 300_000)
    child.once("error", (error) => {
      clearTimeout(timer)
      resume(Effect.fail(new ProcessError({ name, reason: "spawn", message: `could not run ${command}: ${error.message}`, output: "" })))
    })
    child.once("close", (code, signal) => {
      clearTimeout(timer)
      if (code === 0) return resume(Effect.succeed(output()))
      const message = timedOut
        ? `${command} did not finish within ${options.timeoutMs ?? 300_000} ms`
        : `${command} ${signal === null ? `exited with code ${code}` : `was killed by ${signal}`}`
      resume(Effect.fail(new ProcessError({ name, reason: timedOut ? "timeout" : "exited", message, output: tail() })))
    })
    return Effect.sync(() => {
      clearTimeout(timer)
      child.kill("SIGKILL")
    })
  })

/** A port that was free on `host` a moment ago (another process may still take it first). */
export const freePort = (host = "127.0.0.1"): Effect.Effect<number, ProcessError> =>
  Effect.callback((resume) => {
    const server = net.createServer()
    server.once("error", (error) =>
      resume(Effect.fail(new ProcessError({ name: "freePort", reason: "spawn", message: `no free port on ${host}: ${error.message}`, output: "" })))
    )
    server.listen(0, host, () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resume(Effect.succeed(port)))
    })
  })

/** The resident set size of a process in bytes (Linux /proc), or `undefined` when it is gone. */
export const residentBytes = (pid: number): Effect.Effect<number | undefined> =>
  Effect.sync(() => {
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
      const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1]
      return kb === undefined ? undefined : Number(kb) * 1024
    } catch {
      return undefined
    }
  })
