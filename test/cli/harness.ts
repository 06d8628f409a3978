/**
 * Drives the real `grove` binary (`node packages/cli/bin/grove.js`) for the
 * end-to-end suites: each run gets its own HOME, an empty PATH (so no browser
 * opener is found) and only the environment the test gives it.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { CLI_BIN, type GroveServer, startServer } from "../support/GroveServer.ts"
import { expect } from "@effect/vitest"

export interface GroveRun {
  readonly code: number
  /** The signal that ended the process (then `code` is -1), from `spawnGrove`. */
  readonly signal?: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

export interface GroveOptions {
  readonly home: string
  readonly cwd?: string
  readonly env?: Record<string, string>
  /** Written to stdin, which is then closed. */
  readonly input?: string
  /**
   * Run on a pseudo-terminal (through util-linux `script`), so stdin is a terminal;
   * stdout and stderr then arrive together on stdout. Otherwise stdin is a pipe.
   */
  readonly terminal?: boolean
}

const shellQuote = (arg: string) => `'${arg.replaceAll("'", "'\\''")}'`

const created: Array<string> = []

/** A fresh directory, removed by `removeTempDirs`. */
export const tempDir = (prefix: string): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `grove-cli-e2e-${prefix}-`))
  created.push(dir)
  return dir
}

export const removeTempDirs = () => {
  for (const dir of created.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
}

const suiteServers: Array<GroveServer> = []

/** The suite's server, on a fresh data directory; `stopSuiteServers` (an afterAll) stops it. */
export const startSuiteServer = async (): Promise<GroveServer> => {
  const server = await startServer({ dataDir: tempDir("data") })
  suiteServers.push(server)
  return server
}

/** Stops the suite's servers and removes its temporary directories. */
export const stopSuiteServers = async () => {
  for (const server of suiteServers.splice(0)) await server.stop()
  removeTempDirs()
}

const start = (args: ReadonlyArray<string>, options: GroveOptions): ChildProcessWithoutNullStreams => {
  const command = [process.execPath, CLI_BIN, ...args]
  const [file, ...argv] = options.terminal === true
    ? ["/usr/bin/script", "--quiet", "--return", "--command", command.map(shellQuote).join(" "), "/dev/null"]
    : command
  const child = spawn(file!, argv, {
    cwd: options.cwd ?? options.home,
    env: { HOME: options.home, PATH: "", ...options.env },
    stdio: ["pipe", "pipe", "pipe"]
  })
  // The client may exit before it reads its input: an EPIPE then is no failure of the test.
  child.stdin.on("error", () => undefined)
  child.stdin.end(options.input ?? "")
  return child
}

export interface RunningGrove {
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the first match of `pattern` in stderr. */
  readonly waitForStderr: (pattern: RegExp, timeoutMs?: number) => Promise<RegExpMatchArray>
  /** Sends `signal` to the client (as Ctrl-C or a `kill` would). */
  readonly kill: (signal: NodeJS.Signals) => void
  readonly done: Promise<GroveRun>
}

/** Starts `grove args...` and returns while it runs. It is killed after `timeoutMs`. */
export const spawnGrove = (args: ReadonlyArray<string>, options: GroveOptions, timeoutMs = 60_000): RunningGrove => {
  const child = start(args, options)
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
  const done = new Promise<GroveRun>((resolve, reject) => {
    child.on("error", reject)
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code: code ?? -1, signal, stdout, stderr })
    })
  })
  const waitForStderr = (pattern: RegExp, waitMs = 20_000) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = () => {
        const match = stderr.match(pattern)
        if (match === null) return false
        clearTimeout(timeout)
        child.stderr.off("data", check)
        resolve(match)
        return true
      }
      const timeout = setTimeout(() => reject(new Error(`no ${pattern} in stderr:\n${stderr}`)), waitMs)
      if (!check()) child.stderr.on("data", check)
    })
  return { stdout: () => stdout, stderr: () => stderr, waitForStderr, kill: (signal) => child.kill(signal), done }
}

export const grove = (args: ReadonlyArray<string>, options: GroveOptions): Promise<GroveRun> => spawnGrove(args, options).done

/** stdout as the one JSON document `--json` promises (fails the test if it is anything else). */
export const json = (run: GroveRun): any => JSON.parse(run.stdout)

/** A user of `server` with their own HOME, signed in by `key` (SERVICE_API_KEY). */
export const userOf = (server: GroveServer, name: string, key: string): GroveOptions => ({
  home: tempDir(name),
  env: { SERVICE_API_KEY: key, GROVE_REMOTE: server.url }
})

/** Every file under `root` (not .grove) with its kind, mode bits and content hash or link target. */
export const listing = (root: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const visit = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = dir === "" ? entry.name : `${dir}/${entry.name}`
      if (rel === ".grove") continue
      const abs = path.join(root, rel)
      if (entry.isDirectory()) visit(rel)
      else if (entry.isSymbolicLink()) out[rel] = `link:${fs.readlinkSync(abs)}`
      else {
        const mode = (fs.statSync(abs).mode & 0o111) !== 0 ? "x" : "-"
        out[rel] = `${mode}:${createHash("sha256").update(fs.readFileSync(abs)).digest("hex")}`
      }
    }
  }
  visit("")
  return out
}

/** The same options, run in `cwd`. */
export const at = (options: GroveOptions, cwd: string): GroveOptions => ({ ...options, cwd })

/**
 * For `node --import`: writes `builtins <name> <name> ...` (the Node modules the run loaded) to stderr at exit, with
 * fs.writeSync (process.stderr on a pipe would load node:net and the streams itself). `builtinsOf` reads it back.
 */
export const REPORT_BUILTINS = `data:text/javascript,${
  encodeURIComponent(
    `process.on("exit", () => process.getBuiltinModule("node:fs").writeSync(2, "builtins " + process.moduleLoadList.filter((m) => m.startsWith("NativeModule ")).map((m) => m.slice(13)).join(" ") + "\\n"))`
  )
}`
export const builtinsOf = (stderr: string): ReadonlyArray<string> => (/^builtins (.*)$/m.exec(stderr)?.[1] ?? "").split(" ")


/** Runs grove and expects exit 0, showing its output when it is not. */
export const ok = async (args: ReadonlyArray<string>, options: GroveOptions) => {
  const run = await grove(args, options)
  expect(run.code, `grove ${args.join(" ")}\n${run.stdout}\n${run.stderr}`).toBe(0)
  return run
}

/**
 * Posts the sign-in form of `{site}/cli-auth` as a browser does: it loads the page first for the
 * CSRF cookie and the token of its hidden field, then posts with both and the site's Origin.
 */
export const postSignIn = async (site: string, fields: { username: string; password: string; callback?: string; state?: string }) => {
  const page = await fetch(`${site}/cli-auth`)
  const cookie = (page.headers.get("set-cookie") ?? "").split(";")[0]!
  const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())?.[1] ?? ""
  return fetch(`${site}/cli-auth`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie, origin: site },
    body: new URLSearchParams({ callback: "", state: "", csrf, ...fields }).toString()
  })
}

/** The one-time code the sign-in page shows for a headless login. */
export const oneTimeCode = async (site: string, username: string, password: string): Promise<string> => {
  const response = await postSignIn(site, { username, password })
  const html = await response.text()
  const match = /id="code"[^>]*>([^<]+)</.exec(html)
  if (response.status !== 200 || match === null) throw new Error(`no one-time code (HTTP ${response.status}):\n${html}`)
  return match[1]!.trim()
}

/** Writes `.grove/config.json` as clone will. */
export const writeCheckout = (root: string, config: { remote: string; key: string }) => {
  fs.mkdirSync(path.join(root, ".grove"), { recursive: true })
  fs.writeFileSync(path.join(root, ".grove", "config.json"), JSON.stringify(config))
}
