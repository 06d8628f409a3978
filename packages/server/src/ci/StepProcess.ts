/**
 * One step's process: the command Sandbox.stepCommand built (bwrap around `bash -e -o pipefail -c
 * <run>`) in a pseudo-terminal (node-pty, started by the server's helper process: the PtySpawner service), with
 * only the environment it is given: bwrap is PID 1 of the sandbox, so that is all its /proc/1/environ holds. Or a sandbox started ahead (prepareStep,
 * Sandbox.warmCommand), told its step through its terminal. The process leads its own session;
 * interrupting the effect (timeout, cancel) kills its group, which ends the sandbox's PID namespace
 * and with it every process inside (a `setsid` one too), and waits for it to be gone. Network on,
 * the step ends at the exit marker the shell around bwrap prints (Sandbox.Command.exitMarker), not at
 * pasta's exit 10-40 ms later; that is awaited when the caller's scope closes.
 */
import { Effect, type Scope } from "effect"
import { PtySpawner, type Spawner, type Terminal } from "./PtySpawner.ts"
import type { Command } from "./Sandbox.ts"

export interface StepOptions {
  readonly command: Command
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly onOutput: (text: string) => void
  /** Told at the step's reported end whether its process (pasta, network on) had exited by then (tests: its teardown is not waited for). */
  readonly onEnd?: ((processExited: boolean) => void) | undefined
}

/** A process in a pty whose output goes where `sink` says, from its first byte. */
interface Started {
  readonly child: Terminal
  /** The exit code (128 + signal), once the output ended. */
  readonly exit: Promise<number>
  /** The step's exit code, once its output ended: at its exit marker, or at `exit`. */
  readonly ended: Promise<number>
  sink: (text: string) => void
  code: number | undefined
  /** Whether the process had exited when its end was reported (set then, not a turn later: see runStep). */
  exitedAtEnd: boolean | undefined
}

const start = (spawner: Spawner, command: Command, cwd: string, env: Readonly<Record<string, string>>): Started => {
  const { file, args, user } = command
  const child = spawner.spawn(file, args, { cwd, env, uid: user?.uid, gid: user?.gid })
  // node-pty (1.1.0, pinned) reports the exit only once the terminal's read side has closed (every
  // holder of the pty gone: the sandbox's PID namespace ended, so nothing is left to write) and
  // its last output was delivered: that is the end of the output, no quiet period to wait out.
  const exit = new Promise<number>((done) => {
    child.onExit(({ exitCode, signal }) => {
      command.released?.({ exitCode, signal })
      started.code = signal !== 0 ? 128 + signal : exitCode
      if (held !== "") started.sink(held)
      held = ""
      done(started.code)
      report(started.code)
    })
  })
  // The step's end: its exit marker (network on) or else the process's exit.
  let report: (code: number) => void = () => undefined
  // Output that may be the start of the marker, held back until it is clear whether it is.
  let held = ""
  // Called again by the exit after the marker: the first call is the end.
  const ended = new Promise<number>((done) => (report = (code) => {
    started.exitedAtEnd ??= started.code !== undefined
    done(code)
  }))
  const started: Started = { child, exit, ended, sink: () => undefined, code: undefined, exitedAtEnd: undefined }
  const marker = command.exitMarker
  if (marker === undefined) {
    child.onData((data) => started.sink(data))
    return started
  }
  let reported = false
  child.onData((data) => {
    if (reported) return
    held += data
    const at = held.indexOf(marker)
    const end = at === -1 ? -1 : held.indexOf("\x07", at + marker.length)
    if (end !== -1) {
      const code = Number(held.slice(at + marker.length, end))
      reported = true
      if (at > 0) started.sink(held.slice(0, at))
      held = ""
      report(Number.isInteger(code) ? code : 1)
      return
    }
    const keep = at !== -1 ? held.length - at : heldBack(held, marker)
    if (keep < held.length) started.sink(held.slice(0, held.length - keep))
    held = held.slice(held.length - keep)
  })
  return started
}

/** How many bytes at the end of `text` could be the start of `marker`. */
const heldBack = (text: string, marker: string): number => {
  for (let length = Math.min(text.length, marker.length - 1); length > 0; length--) {
    if (marker.startsWith(text.slice(text.length - length))) return length
  }
  return 0
}

/**
 * Sends the output to `onOutput` until the step ended; interrupted: kills its whole group, then waits
 * until it exited. What is left of the process after the step's end (pasta's teardown) is awaited when
 * the scope closes, before the job's host user is given back; killed if it takes over 5 s.
 */
const follow = (started: Started, onOutput: (text: string) => void): Effect.Effect<number, never, Scope.Scope> =>
  Effect.addFinalizer(() => Effect.promise(() => gone(started, 5000))).pipe(Effect.andThen(
    Effect.callback<number>((resume) => {
      started.sink = (data) => onOutput(data.replace(/\r\n/g, "\n"))
      void started.ended.then((code) => resume(Effect.succeed(code)))
      return Effect.promise(() => gone(started, 0))
    })
  ))

/** Resolves once the process exited: after `grace` ms, its whole group is killed (then at most 5 s more). */
const gone = async (started: Started, grace: number) => {
  const waited = async (ms: number) => {
    let timer: ReturnType<typeof setTimeout> | undefined
    await Promise.race([started.exit, new Promise((done) => (timer = setTimeout(done, ms)))])
    clearTimeout(timer)
  }
  if (started.code === undefined && grace > 0) await waited(grace)
  if (started.code !== undefined) return
  started.child.kill()
  await waited(5000)
}

/** The shell's exit code (128 + signal when a signal ended it). */
export const runStep = (options: StepOptions): Effect.Effect<number, never, Scope.Scope | PtySpawner> =>
  PtySpawner.use((spawner) => {
    // One that could not be started prints why and exits 127 (PtySpawner).
    const started = start(spawner, options.command, options.cwd, options.env)
    const { onEnd } = options
    // Read when the end was reported, not in `ended`'s callback: the helper's marker and exit lines often come in one
    // chunk (load), and by the callback's turn the exit line had set `code` though the marker ended the step first.
    if (onEnd !== undefined) void started.ended.then(() => onEnd(started.exitedAtEnd === true))
    return follow(started, options.onOutput)
  })

/** A sandbox started ahead of its step (Sandbox.warmCommand), waiting for it. */
export interface PreparedStep {
  /** Whether it is still waiting (it may have died meanwhile). */
  readonly waiting: () => boolean
  /** Runs the step in it (`line`: Sandbox.warmStepLine), as runStep does; once. */
  readonly run: (line: string, onOutput: (text: string) => void) => Effect.Effect<number, never, Scope.Scope>
  /** Ends it unused (its whole group). */
  readonly discard: () => void
}

/** Starts `command` and resolves once it printed `ready`; rejects when it ends (or prints something else) first. */
export const prepareStep = (spawner: Spawner, command: Command, cwd: string, env: Readonly<Record<string, string>>, ready: string): Promise<PreparedStep> =>
  new Promise((resolve, reject) => {
    const started = start(spawner, command, cwd, env)
    let seen = ""
    let used = false
    started.sink = (data) => {
      seen += data
      if (seen === ready) {
        started.sink = () => undefined
        resolve({
          waiting: () => started.code === undefined && !used,
          run: (line, onOutput) =>
            Effect.suspend(() => {
              used = true
              started.child.write(line)
              return follow(started, onOutput)
            }),
          discard: () => {
            used = true
            if (started.code === undefined) started.child.kill()
          }
        })
      } else if (!ready.startsWith(seen)) {
        started.child.kill()
        reject(new Error(`the sandbox did not start: ${seen.slice(0, 500)}`))
      }
    }
    void started.exit.then((code) => reject(new Error(`the sandbox ended (${code}) before its step: ${seen.slice(0, 500)}`)))
  })
