/**
 * The first creation of an embedded database's directory (initdb), in a child process: initdb grows
 * PGlite's WebAssembly memory to ~200 MiB and a WebAssembly memory never shrinks, so a server that ran
 * it in its own process kept ~550-600 MiB RSS where a restarted one holds ~190. The child's memory goes
 * back with the child; this process then opens the directory as a restart does.
 *
 * Crash-safe: the child initializes a temporary directory beside the target (`<dir>.init-<pid>`), renamed
 * to `<dir>` only once complete, so `<dir>` is never a half-initialized database. A start finds its
 * predecessors' leftovers (their pid gone) and removes them. Initializers of one directory (two servers
 * started at once, or a caller without the data-dir lock) take turns on `<dir>.init.lock`: the second
 * finds the first's database and takes it, never moving it aside.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const CHILD = fileURLToPath(new URL("./PgliteInitChild.ts", import.meta.url))
const TEMP = ".init-"

/** Whether `dir` holds an initialized database (PostgreSQL writes PG_VERSION, PGlite looks for it). */
export const isInitialized = (dir: string) => fs.existsSync(path.join(dir, "PG_VERSION"))

/** Whether process `pid` exists (EPERM: it does, someone else's). Also the data-dir lock's test (server admin/DataDirLock.ts). */
export const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Removes the temporary directories of inits whose process is gone (a crash or a kill during a first start). */
export const removeAbandoned = (dir: string) => {
  const parent = path.dirname(dir)
  const prefix = `${path.basename(dir)}${TEMP}`
  for (const name of fs.existsSync(parent) ? fs.readdirSync(parent) : []) {
    const pid = Number(name.slice(prefix.length))
    if (name.startsWith(prefix) && Number.isInteger(pid) && pid !== process.pid && !processAlive(pid)) {
      fs.rmSync(path.join(parent, name), { recursive: true, force: true })
    }
  }
}

/** Runs the child on `temp`; resolves once it has closed the new database, rejects with its output otherwise. */
const runChild = (temp: string, startParams: ReadonlyArray<string>) =>
  new Promise<void>((resolve, reject) => {
    // Without the server's flags (a small young generation, --expose-gc): the child only runs initdb.
    const child = spawn(process.execPath, [CHILD, temp, JSON.stringify(startParams)], { stdio: ["pipe", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (d: Buffer) => (output += d.toString()))
    child.stderr.on("data", (d: Buffer) => (output += d.toString()))
    child.on("error", reject)
    child.on("exit", (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`initdb in a child process failed (${signal ?? `exit ${code}`}): ${output.trim()}`)))
  })

const LOCK = ".init.lock"

/**
 * Takes `<dir>.init.lock` (created `wx`, holding our pid): one initializer of `dir` at a time, across
 * processes and within one. A lock whose process is gone (a kill during a first start) is taken over;
 * a live one is waited for. Answers its release.
 */
const lock = async (dir: string): Promise<() => void> => {
  const file = `${dir}${LOCK}`
  for (;;) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: "wx" })
      return () => fs.rmSync(file, { force: true })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    }
    let owner = Number.NaN
    try {
      owner = Number(fs.readFileSync(file, "utf8"))
    } catch {
      continue // released meanwhile
    }
    // An empty file is a holder between its `wx` and its write: wait for it like a live one. (Two processes
    // taking over one dead lock at the same instant could both proceed; a dead lock is a crash's leftover.)
    if (Number.isInteger(owner) && owner > 0 && !processAlive(owner)) fs.rmSync(file, { force: true })
    else await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * Makes `dir` an initialized database if it is not one yet: initdb in a child process into a temporary
 * directory beside it, then a rename, all under `<dir>.init.lock`. A directory without PG_VERSION left by
 * an older version's interrupted first start is moved aside (`<dir>.incomplete-<time>`), not taken as a database.
 */
export const initialize = async (dir: string, startParams: ReadonlyArray<string>): Promise<void> => {
  if (isInitialized(dir)) return
  fs.mkdirSync(path.dirname(dir), { recursive: true })
  const release = await lock(dir)
  try {
    removeAbandoned(dir)
    // Checked again under the lock, right before a directory without PG_VERSION is moved aside: the
    // holder before us may have initialized it.
    if (isInitialized(dir)) return
    if (fs.existsSync(dir)) {
      if (fs.readdirSync(dir).length === 0) fs.rmdirSync(dir)
      else fs.renameSync(dir, `${dir}.incomplete-${Date.now()}`)
    }
    const temp = `${dir}${TEMP}${process.pid}`
    fs.rmSync(temp, { recursive: true, force: true })
    try {
      await runChild(temp, startParams)
      fs.renameSync(temp, dir)
    } catch (error) {
      fs.rmSync(temp, { recursive: true, force: true })
      throw error
    }
  } finally {
    release()
  }
}
