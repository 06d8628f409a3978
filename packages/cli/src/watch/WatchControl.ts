/**
 * `grove watch start|stop|status` without Effect (WatchCommands.ts wraps them): start the checkout's watcher
 * (WatchDaemon.ts) as a background process of its own, stop it, or say whether one answers.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { askWatcher } from "./WatchClient.ts"
import { logPath, socketPath, SOCKET_PATH_MAX, watchDir } from "./WatchPaths.ts"

/** The daemon's entry: the bundle's when this runs from it (dist/chunks/), else the source. */
const daemonEntry = (): string =>
  import.meta.url.endsWith(".ts")
    ? new URL("./WatchDaemonMain.ts", import.meta.url).pathname
    : new URL("../watch-daemon.mjs", import.meta.url).pathname

export interface WatchStatus {
  readonly running: boolean
  readonly socket: string
  readonly pid?: number | undefined
}

/** The pid of the daemon that answers on the checkout's socket (it says it: a pid file would be one more thing to go stale). */
const daemonPid = async (root: string): Promise<number | undefined> => {
  const pid = (await askWatcher(root, null))?.pid
  return Number.isInteger(pid) && pid! > 0 ? pid : undefined
}

export const watchStatus = async (root: string): Promise<WatchStatus> => {
  const pid = await daemonPid(root)
  return { running: pid !== undefined, socket: socketPath(root), pid }
}

/** A daemon that neither says "ready" nor exits within this is stopped, and the start fails. */
const START_WAIT_MS = 60_000

/**
 * The daemon's environment: what it needs and nothing else (it lives for hours; the caller's secrets, a
 * SERVICE_API_KEY or a token, have no business in its environ).
 */
const daemonEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (name === "PATH" || name === "HOME" || name === "TZ" || name === "LANG" || name.startsWith("GROVE_WATCH_")) env[name] = value
  }
  return env
}

/** Starts the watcher unless one answers already; resolves once it answers (or rejects with the reason from its log). */
export const startWatch = async (root: string): Promise<{ readonly started: boolean; readonly pid?: number | undefined }> => {
  if (Buffer.byteLength(socketPath(root)) > SOCKET_PATH_MAX) {
    throw new Error(`the checkout's path is too long for a unix socket (${socketPath(root)}: more than ${SOCKET_PATH_MAX} bytes)`)
  }
  // The single-file grove (scripts/build-sea.ts) carries no daemon: only the client installed from the sources has one.
  if (!fs.existsSync(daemonEntry())) throw new Error("this grove has no file watcher (the single-file build); use the client installed from the sources")
  const running = await daemonPid(root)
  if (running !== undefined) return { started: false, pid: running }
  fs.mkdirSync(watchDir(root), { recursive: true, mode: 0o700 })
  const log = fs.openSync(logPath(root), "a")
  const child = spawn(process.execPath, [daemonEntry(), root], { detached: true, stdio: ["ignore", "pipe", log], cwd: root, env: daemonEnv() })
  fs.closeSync(log)
  const outcome = await new Promise<"ready" | "late" | number | null>((resolve) => {
    let text = ""
    const timer = setTimeout(() => resolve("late"), START_WAIT_MS)
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (data: string) => {
      text += data
      if (text.includes("ready\n")) {
        clearTimeout(timer)
        resolve("ready")
      }
    })
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve(code)
    })
  })
  child.stdout!.destroy()
  child.unref()
  if (outcome === "ready") return { started: true, pid: child.pid }
  if (outcome === "late") {
    try {
      process.kill(child.pid!, "SIGTERM")
    } catch {
      // ended meanwhile
    }
    throw new Error(`the watcher did not start: no answer within ${START_WAIT_MS / 1000} s (its log: ${logPath(root)})`)
  }
  // 3: another daemon answers on the socket (one slower than daemonPid's wait): it runs, this one was not needed.
  if (outcome === 3) return { started: false, pid: await daemonPid(root) }
  const lines = fs.readFileSync(logPath(root), "utf8").trim().split("\n")
  throw new Error(`the watcher did not start: ${lines.at(-1) ?? "no reason given"}`)
}

/** Stops the watcher that answers on this checkout's socket; false when none did. */
export const stopWatch = async (root: string): Promise<boolean> => {
  const pid = await daemonPid(root)
  if (pid === undefined) return false
  try {
    process.kill(pid, "SIGTERM")
  } catch (error) {
    // It ended between its answer and the signal: stopped all the same.
    if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error
  }
  for (let i = 0; i < 100 && fs.existsSync(socketPath(root)); i++) await new Promise((r) => setTimeout(r, 20))
  return true
}
