/**
 * Processes for the content benchmark: timed one-shot commands, long-lived
 * servers behind an orphan guard (a bash wrapper that kills the server when
 * our end of its stdin pipe closes), and clean-up on exit and on Ctrl-C.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"

const cleanups: Array<() => Promise<void> | void> = []
const running = new Set<ChildProcess>()

/** Runs `fn` on exit (last registered first), also after Ctrl-C or SIGTERM. */
export const onCleanup = (fn: () => Promise<void> | void) => cleanups.push(fn)

export const cleanupAll = async () => {
  for (const child of running) child.kill("SIGTERM")
  while (cleanups.length > 0) {
    try {
      await cleanups.pop()!()
    } catch (error) {
      console.error(`clean-up failed: ${String(error)}`)
    }
  }
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: cleaning up`)
    void cleanupAll().finally(() => process.exit(130))
  })
}

export interface Ran {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
  /** Wall time from spawn to exit. */
  readonly ms: number
  readonly started: number
  /** CPU of the command and everything it started (read when it has been reaped). */
  readonly cpuMs: number
  /** CPU the server used meanwhile, when the caller measured it. */
  readonly serverCpuMs?: number
}

export const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { cwd?: string; env?: NodeJS.ProcessEnv; check?: boolean } = {}
): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    const cpuBefore = reapedChildrenCpu()
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"] })
    running.add(child)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    child.on("error", reject)
    child.on("close", (code) => {
      const ms = performance.now() - started
      running.delete(child)
      const result = { code: code ?? -1, stdout, stderr, ms, started, cpuMs: reapedChildrenCpu() - cpuBefore }
      if (options.check !== false && result.code !== 0) {
        reject(new Error(`${command} ${args.join(" ")} exited with ${result.code}\n${stderr}${stdout}`))
      } else resolve(result)
    })
  })

export interface Guarded {
  /** The server's own pid (not the wrapper's). */
  readonly pid: number
  readonly output: () => string
  readonly stop: () => Promise<void>
}

/** Starts `command` behind the orphan guard and waits until `ready` matches its output. */
export const startGuarded = (command: string, args: ReadonlyArray<string>, ready: RegExp, env?: NodeJS.ProcessEnv) =>
  new Promise<Guarded & { match: RegExpExecArray }>((resolve, reject) => {
    const script = '"$@" </dev/null & pid=$!; echo "guard-pid $pid"; read _; kill $pid 2>/dev/null; wait $pid'
    const wrapper = spawn("bash", ["-c", script, "guard", command, ...args], { env: env ?? process.env, stdio: ["pipe", "pipe", "pipe"] })
    let output = ""
    let pid = 0
    let settled = false
    const exited = new Promise<void>((r) => wrapper.once("exit", () => r()))
    const stop = async () => {
      if (wrapper.exitCode !== null || wrapper.signalCode !== null) return
      wrapper.stdin.end()
      const timer = setTimeout(() => {
        try {
          if (pid > 0) process.kill(pid, "SIGKILL")
        } catch { /* already gone */ }
      }, 15_000)
      await exited
      clearTimeout(timer)
    }
    const onData = (d: Buffer) => {
      output += d.toString()
      const p = /guard-pid (\d+)/.exec(output)
      if (p) pid = Number(p[1])
      const match = ready.exec(output)
      if (match && pid > 0 && !settled) {
        settled = true
        clearTimeout(timer)
        resolve({ pid, output: () => output, stop, match })
      }
    }
    const timer = setTimeout(() => {
      settled = true
      void stop()
      reject(new Error(`${command} did not start:\n${output}`))
    }, 60_000)
    wrapper.stdout.on("data", onData)
    wrapper.stderr.on("data", onData)
    wrapper.on("exit", (code) => {
      if (!settled) {
        settled = true
        clearTimeout(timer)
        reject(new Error(`${command} exited with ${code}:\n${output}`))
      }
    })
  })

/** Resident set size of `pid` in bytes. */
export const rssOf = (pid: number): number => {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024
}

/** Samples the RSS of `pid` every `ms` until stopped; answers the first and the highest sample. */
export const sampleRss = (pid: number, ms = 50) => {
  const first = rssOf(pid)
  let peak = first
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssOf(pid))
    } catch { /* process gone */ }
  }, ms)
  return () => {
    clearInterval(timer)
    try {
      peak = Math.max(peak, rssOf(pid))
    } catch { /* process gone */ }
    return { first, peak }
  }
}

const TICK_MS = 10 // USER_HZ is 100 on Linux
const statFields = (pid: number | "self") => fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(")").at(-1)!.trim().split(" ").map(Number)

/** CPU time (user + system, ms) used so far by `pid`. */
export const cpuOf = (pid: number): number => {
  const f = statFields(pid)
  return (f[11]! + f[12]!) * TICK_MS
}

/** CPU time (ms) of the children this process has reaped (the commands `run` started, and their own children). */
export const reapedChildrenCpu = (): number => {
  const f = statFields("self")
  return (f[13]! + f[14]!) * TICK_MS
}
