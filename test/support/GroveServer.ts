/**
 * Runs the real `grove-server` binary for end-to-end tests: a fresh data
 * directory, a free port on 127.0.0.1, and helpers for the admin commands.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export const ROOT = path.resolve(import.meta.dirname, "../..")
export const SERVER_BIN = path.join(ROOT, "packages/server/bin/grove-server.js")
export const CLI_BIN = path.join(ROOT, "packages/cli/bin/grove.js")

export interface RunResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs a Node entry point under this Node (24) and collects its output. */
export const run = (
  bin: string,
  args: ReadonlyArray<string>,
  options: { env?: NodeJS.ProcessEnv | undefined; input?: string | undefined; cwd?: string | undefined; timeoutMs?: number | undefined } = {}
): Promise<RunResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      cwd: options.cwd ?? ROOT,
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code: code ?? -1, stdout, stderr })
    })
    // A command may exit before it reads its input: an EPIPE then is no failure of the test.
    child.stdin.on("error", () => undefined)
    child.stdin.end(options.input ?? "")
  })

export interface GroveServer {
  readonly url: string
  readonly dataDir: string
  readonly process: ChildProcess
  readonly output: () => string
  /** `grove-server user create`; returns the API key (the last line of its output). */
  readonly createUser: (name: string, options?: { admin?: boolean; password?: string }) => Promise<string>
  readonly stop: () => Promise<void>
}

export interface StartOptions {
  readonly dataDir?: string
  readonly env?: NodeJS.ProcessEnv
  readonly args?: ReadonlyArray<string>
  /** The entry point to run instead of `grove-server` (e.g. the server's bundle). */
  readonly bin?: string
  /**
   * Send the server's stdout and stderr to this file instead of a pipe. For benchmarks that generate load
   * from this process: reading a busy server's access log through a pipe took the load generator's CPU.
   */
  readonly logFile?: string
}

/**
 * Servers this test process started and has not seen exit. A test that fails or times out may never
 * reach its `stop()` (a `beforeAll` that timed out leaves no handle to stop): they are killed when the
 * test process exits, so no server outlives its suite.
 */
const live = new Set<ChildProcess>()
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL")
})

export const startServer = async (options: StartOptions = {}): Promise<GroveServer> => {
  const ownDataDir = options.dataDir === undefined
  const dataDir = options.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "grove-e2e-"))
  const logFd = options.logFile === undefined ? undefined : fs.openSync(options.logFile, "a")
  // This start's output only: the file may hold an earlier start's (its "listening on" another port).
  const logStart = options.logFile === undefined ? 0 : fs.statSync(options.logFile).size
  const child = spawn(process.execPath, [options.bin ?? SERVER_BIN, "serve", "--port", "0", "--data-dir", dataDir, ...(options.args ?? [])], {
    cwd: ROOT,
    env: { ...process.env, ...options.env },
    stdio: logFd === undefined ? ["ignore", "pipe", "pipe"] : ["ignore", logFd, logFd]
  })
  if (logFd !== undefined) fs.closeSync(logFd)
  live.add(child)
  child.once("exit", () => live.delete(child))
  let piped = ""
  const output = () => options.logFile === undefined ? piped : fs.readFileSync(options.logFile).subarray(logStart).toString()
  const started = new Promise<string>((resolve, reject) => {
    // Generous: on a busy 2-core machine (load 15-20) a start has taken over a minute.
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output()}`)), 180_000)
    let listening = false
    const look = (text: string) => {
      // Only until started: a regex over the whole output flattens it (a copy of every byte logged so far)
      // at each chunk, which under a read benchmark's access log took the load generator's CPU.
      if (listening) return
      const match = /listening on (http:\/\/\S+)/.exec(text)
      if (match) {
        listening = true
        clearTimeout(timer)
        if (poll !== undefined) clearInterval(poll)
        resolve(match[1]!)
      }
    }
    const poll = options.logFile === undefined ? undefined : setInterval(() => look(output()), 20)
    if (logFd === undefined) {
      const onData = (d: Buffer) => {
        piped += d.toString()
        look(piped)
      }
      child.stdout!.on("data", onData)
      child.stderr!.on("data", onData)
    }
    child.on("exit", (code) => {
      clearTimeout(timer)
      if (poll !== undefined) clearInterval(poll)
      reject(new Error(`server exited with ${code}:\n${output()}`))
    })
  })
  // A server that did not come up is not left running (nor its data directory left behind).
  const url = await started.catch((error: unknown) => {
    child.kill("SIGKILL")
    if (ownDataDir) fs.rmSync(dataDir, { recursive: true, force: true })
    throw error
  })
  const stop = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        if (ownDataDir) fs.rmSync(dataDir, { recursive: true, force: true })
        resolve()
      }
      // A process ended by a signal has a null exitCode and a signalCode.
      if (child.exitCode !== null || child.signalCode !== null) return done()
      const kill = setTimeout(() => child.kill("SIGKILL"), 15_000)
      child.once("exit", () => {
        clearTimeout(kill)
        done()
      })
      child.kill("SIGTERM")
    })
  return {
    url,
    dataDir,
    process: child,
    output,
    stop,
    createUser: async (name, opts = {}) => {
      const args = ["user", "create", name, "--data-dir", dataDir]
      if (opts.admin) args.push("--admin")
      if (opts.password !== undefined) args.push("--password-stdin")
      const result = await run(SERVER_BIN, args, { input: opts.password === undefined ? "" : `${opts.password}\n`, env: options.env })
      if (result.code !== 0) throw new Error(`user create failed (${result.code}): ${result.stderr}`)
      const lines = result.stdout.trim().split("\n")
      return lines[lines.length - 1]!
    }
  }
}
