/**
 * Driving the public Oak client (oakvcs-cli 0.109.0) in end-to-end suites: finding the binary,
 * running it with a clean environment, reading its JSON, and comparing trees. The binary is found
 * on PATH or in ~/.cargo/bin; `bash scripts/setup/oak.sh` installs it (about 20 minutes). Suites
 * skip with a printed reason when it is absent: the one allowed skip, since the client is an
 * external Rust program.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { expect } from "@effect/vitest"
import { waitFor } from "./waitFor.ts"

export const OAK_VERSION = "0.109.0"

const findOak = (): string | undefined => {
  const dirs = (process.env["PATH"] ?? "").split(path.delimiter).filter((d) => d !== "")
  dirs.push(path.join(process.env["CARGO_HOME"] ?? path.join(os.homedir(), ".cargo"), "bin"))
  for (const dir of dirs) {
    const candidate = path.join(dir, "oak")
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      if (fs.statSync(candidate).isFile()) return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

export const oakPath = findOak()
if (oakPath === undefined) {
  console.warn(
    `test/oak skipped: the Oak client binary (oak ${OAK_VERSION}) is not on PATH or in ~/.cargo/bin. ` +
      `Install it with \`bash scripts/setup/oak.sh\` or \`cargo install oakvcs-cli --version ${OAK_VERSION} --locked\`.`
  )
}

export interface OakRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

export interface OakClient {
  /** Runs `oak args` in `cwd` (OAK_VERBOSE=1: its HTTP log is in stderr). */
  readonly run: (args: ReadonlyArray<string>, cwd: string, extraEnv?: Record<string, string>, input?: string) => Promise<OakRun>
  /** Starts a long-running `oak args` (`watch start --foreground`); `stop` ends it with SIGTERM and answers its run. */
  readonly background: (args: ReadonlyArray<string>, cwd: string, extraEnv?: Record<string, string>) => OakBackground
  /**
   * Runs `oak args` in a pseudo-terminal (util-linux `script`), as a person at a terminal: each
   * prompt matching `answers[i][0]` in turn gets the keys `answers[i][1]`. What it printed is stdout.
   */
  readonly terminal: (args: ReadonlyArray<string>, cwd: string, answers: ReadonlyArray<readonly [RegExp, string]>) => Promise<OakRun>
  /** Kills every client still running. */
  readonly killAll: () => void
}

export interface OakBackground {
  /** What it printed so far (stdout, then stderr). */
  readonly output: () => string
  readonly stop: () => Promise<OakRun>
}

/** An Oak client with its own HOME, signed in with `key` as `author`. */
export const makeOak = (options: { readonly home: () => string; readonly key: () => string; readonly author: string }): OakClient => {
  const children = new Set<ChildProcess>()
  const start = (args: ReadonlyArray<string>, cwd: string, extraEnv: Record<string, string>, timeoutMs: number, command = oakPath!) => {
    const child = spawn(command, args, {
      cwd,
      // Only what the client needs: no git variables, no inherited OAK_* settings.
      env: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: options.home(),
        OAK_NO_UPDATE_CHECK: "1",
        OAK_API_KEY: options.key(),
        OAK_AUTHOR: options.author,
        NO_COLOR: "1",
        OAK_VERBOSE: "1",
        ...extraEnv
      },
      stdio: ["pipe", "pipe", "pipe"]
    })
    children.add(child)
    // The client may exit before it reads its input: an EPIPE then is no failure of the test.
    child.stdin.on("error", () => undefined)
    const out = { stdout: "", stderr: "" }
    child.stdout.on("data", (d: Buffer) => (out.stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (out.stderr += d.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    const done = new Promise<OakRun>((resolve, reject) => {
      child.on("error", reject)
      child.on("close", (code) => {
        clearTimeout(timer)
        children.delete(child)
        resolve({ code: code ?? -1, stdout: out.stdout, stderr: out.stderr })
      })
    })
    return { child, out, done }
  }
  const run = (args: ReadonlyArray<string>, cwd: string, extraEnv: Record<string, string> = {}, input = ""): Promise<OakRun> => {
    const { child, done } = start(args, cwd, extraEnv, 120_000)
    // Not a terminal: the client never prompts, except for what `input` answers (a pasted sign-in code).
    child.stdin.end(input)
    return done
  }
  const background = (args: ReadonlyArray<string>, cwd: string, extraEnv: Record<string, string> = {}): OakBackground => {
    const { child, out, done } = start(args, cwd, extraEnv, 600_000)
    child.stdin.end()
    return {
      output: () => out.stdout + out.stderr,
      stop: () => {
        child.kill("SIGTERM")
        return done
      }
    }
  }
  const terminal = (args: ReadonlyArray<string>, cwd: string, answers: ReadonlyArray<readonly [RegExp, string]>): Promise<OakRun> => {
    const quoted = [oakPath!, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ")
    const { child, out, done } = start(["-qfec", quoted, "/dev/null"], cwd, { TERM: "xterm", OAK_VERBOSE: "" }, 120_000, "script")
    const pending = [...answers]
    let seen = 0
    child.stdout.on("data", () => {
      const next = pending[0]
      if (next === undefined || !next[0].test(out.stdout.slice(seen))) return
      pending.shift()
      seen = out.stdout.length
      // A moment for the prompt to switch the terminal to raw mode before the keys arrive.
      setTimeout(() => child.stdin.write(next[1]), 150)
    })
    return done
  }
  return {
    run,
    background,
    terminal,
    killAll: () => {
      for (const child of children) child.kill("SIGKILL")
    }
  }
}

/** Fails with the client's whole output when it did not exit 0. */
export const ok = (run: OakRun, what: string): OakRun => {
  if (run.code !== 0) throw new Error(`${what} exited ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`)
  return run
}

/** The one JSON document `--json` prints (the last line of stdout). */
export const jsonOf = (run: OakRun): any => {
  const line = run.stdout.trim().split("\n").at(-1) ?? ""
  try {
    return JSON.parse(line)
  } catch {
    throw new Error(`no JSON on stdout\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`)
  }
}

export { noise } from "./content.ts"

export type TreeFiles = Map<string, { kind: "file" | "symlink"; bytes: Buffer; executable: boolean }>

/** Every file of a working tree (outside `.oak`): path -> bytes, symlink target or mode. */
export const snapshot = (dir: string): TreeFiles => {
  const files: TreeFiles = new Map()
  const walk = (rel: string) => {
    for (const entry of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const p = rel === "" ? entry.name : `${rel}/${entry.name}`
      if (p === ".oak") continue
      const abs = path.join(dir, p)
      if (entry.isSymbolicLink()) files.set(p, { kind: "symlink", bytes: Buffer.from(fs.readlinkSync(abs)), executable: false })
      else if (entry.isDirectory()) walk(p)
      else files.set(p, { kind: "file", bytes: fs.readFileSync(abs), executable: (fs.statSync(abs).mode & 0o100) !== 0 })
    }
  }
  walk("")
  return files
}

export const expectSameTree = (actualDir: string, expectedDir: string) => {
  const actual = snapshot(actualDir)
  const expected = snapshot(expectedDir)
  expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort())
  for (const [p, e] of expected) {
    const a = actual.get(p)!
    expect({ p, kind: a.kind, executable: a.executable }).toEqual({ p, kind: e.kind, executable: e.executable })
    expect(a.bytes.equals(e.bytes), `content of ${p}`).toBe(true)
  }
}

/** A file's bytes as Grove serves them at `commit`. */
export const rawBytes = async (url: string, key: string, repo: string, commit: string, file: string): Promise<{ status: number; bytes: Buffer }> => {
  const encoded = file.split("/").map(encodeURIComponent).join("/")
  const response = await fetch(`${url}/api/${repo}/raw/${commit}/${encoded}`, { headers: { authorization: `Bearer ${key}` } })
  return { status: response.status, bytes: Buffer.from(await response.arrayBuffer()) }
}

/** Every file of a checkout equals what Grove serves for `commit`. */
export const expectServerHas = async (url: string, key: string, repo: string, commit: string, dir: string) => {
  for (const [p, f] of snapshot(dir)) {
    const raw = await rawBytes(url, key, repo, commit, p)
    expect(raw.status, p).toBe(200)
    expect(raw.bytes.equals(f.bytes), `raw ${p}`).toBe(true)
  }
}

export interface Proxy {
  readonly url: string
  /** Requests forwarded to each target, in the order the targets were given. */
  readonly forwarded: ReadonlyArray<number>
  readonly close: () => Promise<void>
}

/**
 * A pass-through HTTP proxy to `target`, or to each of several targets in turn (a round-robin load
 * balancer: one client command's requests then land on every node). It says which host the client
 * asked for (`X-Forwarded-Host`), so links the server hands out lead back through it. `intercept`
 * sees each request with its whole body and may answer it itself (status and JSON body) instead of
 * forwarding it.
 */
export const startProxy = async (
  target: string | ReadonlyArray<string>,
  intercept: (request: { method: string; url: string; body: Buffer }) => { status: number; body: unknown } | undefined = () => undefined
): Promise<Proxy> => {
  const targets = (typeof target === "string" ? [target] : target).map((t) => new URL(t))
  const forwarded = targets.map(() => 0)
  let next = 0
  const proxy = http.createServer((request, response) => {
    const parts: Array<Buffer> = []
    request.on("data", (d: Buffer) => parts.push(d))
    request.on("end", () => {
      const body = Buffer.concat(parts)
      const answer = intercept({ method: request.method ?? "GET", url: request.url ?? "/", body })
      if (answer !== undefined) {
        const text = JSON.stringify(answer.body)
        response.writeHead(answer.status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
        response.end(text)
        return
      }
      const index = next++ % targets.length
      const upstreamUrl = targets[index]!
      forwarded[index]!++
      const upstream = http.request({
        host: upstreamUrl.hostname,
        port: upstreamUrl.port,
        method: request.method,
        path: request.url,
        headers: { ...request.headers, host: upstreamUrl.host, "x-forwarded-host": request.headers.host }
      }, (reply) => {
        response.writeHead(reply.statusCode ?? 502, reply.headers)
        reply.pipe(response)
      })
      upstream.on("error", () => response.destroy())
      upstream.end(body)
    })
  })
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve))
  const port = (proxy.address() as { port: number }).port
  return {
    url: `http://127.0.0.1:${port}`,
    forwarded,
    close: () =>
      new Promise<void>((resolve) => {
        // An event stream through it would keep it open.
        proxy.closeAllConnections()
        proxy.close(() => resolve())
      })
  }
}

/** `.oak/watch/state.json` of a checkout, as the `oak watch` daemon last wrote it. */
export const watchState = (checkout: string): Record<string, unknown> | undefined => {
  try {
    return JSON.parse(fs.readFileSync(path.join(checkout, ".oak", "watch", "state.json"), "utf8")) as Record<string, unknown>
  } catch {
    return undefined
  }
}

/** What `expectWatchHearsMain` puts on the watched branch before watching, so that branch is on the server. */
export const WATCHED_OWN_FILE = { path: "mine.txt", text: "the watched branch's own work\n" }

/**
 * `oak watch` in `watched` hears main move over the server's event stream. The watched branch first
 * gets a commit of its own, pushed (so the daemon's later push shows on the server). With the
 * daemon's polls an hour apart, `lander` then lands `file` (holding `text`) on main with `oak merge`;
 * the file reaches the watched checkout within seconds, and the daemon pushes its branch with main
 * merged in. Answers the daemon's final state (`last_pushed_head` is that push).
 */
export const expectWatchHearsMain = async (
  client: OakClient,
  watched: string,
  lander: string,
  file: string,
  text: string
): Promise<Record<string, unknown>> => {
  fs.writeFileSync(path.join(watched, WATCHED_OWN_FILE.path), WATCHED_OWN_FILE.text)
  ok(await client.run(["commit"], watched), "oak commit (watched)")
  ok(await client.run(["push", "--json"], watched), "oak push (watched)")
  const daemon = client.background(["watch", "start", "--foreground"], watched, { OAK_WATCH_POLL_SECS: "3600" })
  try {
    const connected = await waitFor("the event stream to connect", async () => {
      const state = watchState(watched)
      return state?.["transport"] === "sse" ? state : undefined
    }, 30_000)
    fs.writeFileSync(path.join(lander, file), text)
    ok(await client.run(["commit"], lander), "oak commit")
    ok(await client.run(["desc", `Land ${file} for the watcher`], lander), "oak desc")
    const main = jsonOf(ok(await client.run(["merge", "--json"], lander), "oak merge")).commit_hash as string
    await waitFor("the merge to reach the watched checkout", async () => (fs.existsSync(path.join(watched, file)) ? true : undefined), 30_000)
    return await waitFor("the watched branch to be pushed with main merged in", async () => {
      const state = watchState(watched)
      const pushed = state?.["last_pushed_head"]
      return state?.["last_main_head"] === main && typeof pushed === "string" && pushed !== connected["last_pushed_head"] ? state : undefined
    }, 30_000)
  } catch (error) {
    throw new Error(`${String(error)}\noak watch said:\n${daemon.output()}`)
  } finally {
    await daemon.stop()
  }
}
