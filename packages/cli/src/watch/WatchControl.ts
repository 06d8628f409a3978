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
  const child = spawn(process.execPath, [daemonEntry(), root], { detached: true, stdio: ["ignore", "pipe", log], cwd: root })
  fs.closeSync(log)
  const ready = await new Promise<boolean>((resolve) => {
    let text = ""
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (data: string) => {
      text += data
      if (text.includes("ready\n")) resolve(true)
    })
    child.on("exit", () => resolve(false))
  })
  child.stdout!.destroy()
  child.unref()
  if (!ready) {
    const lines = fs.readFileSync(logPath(root), "utf8").trim().split("\n")
    throw new Error(`the watcher did not start: ${lines.at(-1) ?? "no reason given"}`)
  }
  return { started: true, pid: child.pid }
}

/** Stops the watcher that answers on this checkout's socket; false when none did. */
export const stopWatch = async (root: string): Promise<boolean> => {
  const pid = await daemonPid(root)
  if (pid === undefined) return false
  process.kill(pid, "SIGTERM")
  for (let i = 0; i < 100 && fs.existsSync(socketPath(root)); i++) await new Promise((r) => setTimeout(r, 20))
  return true
}
