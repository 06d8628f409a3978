/**
 * CI steps' pseudo-terminals, started by this server's PtyHelper process instead of by node-pty in
 * the server: node-pty forks its caller, and a fork of the ~200 MB server (page tables, then its
 * copy-on-write faults) was ~10% of a run's server CPU. One helper per server, small heap, started
 * when a runner of this node is first taken (PtySpawner.start: the first trigger or claim, so its start overlaps the
 * queuing command and the checkout, not the first step) and again at the next step after it died (the steps it had
 * end as killed, 137). It dies with the server: the end of its stdin (the layer closed, or the server ended
 * however) kills every group it started.
 * Output comes in order and from the first byte; the exit only after the last output (as node-pty's).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { Context, Effect, Layer } from "effect"
import type { Socket } from "node:net"
import { fileURLToPath } from "node:url"

const HELPER = fileURLToPath(new URL("./PtyHelper.js", import.meta.url))
// A small heap: it holds one terminal's chunk at a time. No environment of the server's: PATH only.
const HELPER_FLAGS = ["--max-old-space-size=32", "--max-semi-space-size=1"]

export interface Exit {
  readonly exitCode: number
  readonly signal: number
}

/** A process in a pseudo-terminal (the part of node-pty's IPty the steps use). */
export interface Terminal {
  /** Its output in order; set before the event loop turns, it gets the first byte. */
  readonly onData: (listener: (text: string) => void) => void
  /** Once, after its last output. */
  readonly onExit: (listener: (exit: Exit) => void) => void
  readonly write: (text: string) => void
  /** Kills its whole process group (SIGKILL); nothing once it exited. */
  readonly kill: () => void
}

interface Listeners {
  data: (text: string) => void
  exit: (exit: Exit) => void
}

interface Helper {
  readonly child: ChildProcess
  readonly terminals: Map<number, Listeners>
}

/** Options of a terminal's process: exactly `env`; as `uid`/`gid` when given (shared runner). */
export interface SpawnOptions {
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly uid?: number | undefined
  readonly gid?: number | undefined
}

/** One helper process's worth of terminals (the layer holds one per server). */
export interface Spawner {
  /** Starts `file` in a pseudo-terminal (xterm, 120x40) with exactly `env`, as the given uid/gid when set (shared runner). */
  readonly spawn: (file: string, args: ReadonlyArray<string>, options: SpawnOptions) => Terminal
  /** Starts the helper now when none runs, so that the next spawn does not wait for it. */
  readonly start: () => void
  /** The helper's process id, while one runs (tests, bench). */
  readonly pid: () => number | undefined
  /** Ends the helper (its stdin: it kills every group it started); its terminals end as killed. A later spawn starts another. */
  readonly close: () => void
}

/** The helper keeps this process alive only while it has terminals. */
const hold = ({ child }: Helper, held: boolean) => {
  for (const handle of [child, child.stdin as Socket | null, child.stdout as Socket | null]) {
    if (held) handle?.ref()
    else handle?.unref()
  }
}

/**
 * Each "\n"-ended line of `stream`. JSON.stringify writes no raw "\n"; node:readline would also end a line at U+2028
 * and U+2029, which JSON leaves as they are (a step printing one cut its line, and JSON.parse threw).
 */
const eachLine = (stream: NodeJS.ReadableStream, onLine: (line: string) => void) => {
  let held = ""
  stream.setEncoding("utf8")
  stream.on("data", (text: string) => {
    const lines = (held + text).split("\n")
    held = lines.pop() ?? ""
    for (const line of lines) onLine(line)
  })
}

const send = (current: Helper, message: ReadonlyArray<unknown>) => current.child.stdin!.write(`${JSON.stringify(message)}\n`)

const startHelper = (forget: (helper: Helper) => void): Helper => {
  const child = spawn(process.execPath, [...HELPER_FLAGS, HELPER], {
    stdio: ["pipe", "pipe", "inherit"],
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }
  })
  const current: Helper = { child, terminals: new Map() }
  const settled = (id: number, listeners: Listeners, exit: Exit) => {
    current.terminals.delete(id)
    if (current.terminals.size === 0) hold(current, false)
    listeners.exit(exit)
  }
  // Its exit: after every line it wrote was read ("close", not "exit").
  const lost = (why: string) => {
    forget(current)
    for (const [id, listeners] of current.terminals) {
      listeners.data(`\r\ngrove: ${why}\r\n`)
      settled(id, listeners, { exitCode: 0, signal: 9 })
    }
  }
  child.on("error", (error) => lost(`the CI process starter failed: ${error.message}`))
  child.on("close", (code, signal) => lost(`the CI process starter ended (${signal ?? `exit ${code}`})`))
  // Writes after its end: that is told by "close".
  child.stdin!.on("error", () => undefined)
  eachLine(child.stdout!, (line) => {
    let message: [string, number, unknown, unknown]
    try {
      message = JSON.parse(line) as [string, number, unknown, unknown]
    } catch {
      // Not what the helper writes: end it (its steps end as killed, through "close"). The line is not logged:
      // it may hold a step's output before masking.
      child.kill("SIGKILL")
      return
    }
    const [kind, id, first, second] = message
    const listeners = current.terminals.get(id)
    if (listeners === undefined) return
    if (kind === "d") listeners.data(first as string)
    else if (kind === "x") settled(id, listeners, { exitCode: first as number, signal: second as number })
    else {
      listeners.data(`grove: the step could not be started: ${String(first)}\n`)
      settled(id, listeners, { exitCode: 127, signal: 0 })
    }
  })
  hold(current, false)
  return current
}

/** A spawner whose helper starts at its first start or spawn. */
export const makeSpawner = (): Spawner => {
  let helper: Helper | undefined
  let nextId = 1
  const forget = (current: Helper) => {
    if (helper === current) helper = undefined
  }
  const running = () => helper ?? (helper = startHelper(forget))
  return {
    spawn: (file, args, options) => {
      const current = running()
      const id = nextId++
      const listeners: Listeners = { data: () => undefined, exit: () => undefined }
      if (current.terminals.size === 0) hold(current, true)
      current.terminals.set(id, listeners)
      send(current, ["s", id, file, args, options.cwd, options.env, options.uid ?? null, options.gid ?? null])
      return {
        onData: (listener) => (listeners.data = listener),
        onExit: (listener) => (listeners.exit = listener),
        write: (text) => {
          if (current.terminals.has(id)) send(current, ["w", id, text])
        },
        kill: () => {
          if (current.terminals.has(id)) send(current, ["k", id])
        }
      }
    },
    start: () => void running(),
    pid: () => helper?.child.pid,
    close: () => {
      const current = helper
      helper = undefined
      // Its terminals are told through "close", once it has exited.
      current?.child.stdin?.end()
    }
  }
}

/** This server's CI process starter: one helper, ended when the layer closes (after the runs that used it). */
export class PtySpawner extends Context.Service<PtySpawner, Spawner>()("grove/server/ci/PtySpawner") {
  static readonly layer = Layer.effect(PtySpawner, Effect.acquireRelease(Effect.sync(makeSpawner), (spawner) => Effect.sync(() => spawner.close())))
}
