/**
 * One step's process: the command Sandbox.stepCommand built (bwrap around `bash -e -o pipefail -c
 * <run>`) in a pseudo-terminal (node-pty), with only the environment it is given: bwrap is PID 1 of
 * the sandbox, so that is all its /proc/1/environ holds. The process leads its own session;
 * interrupting the effect (timeout, cancel) kills its group, which ends the sandbox's PID namespace
 * and with it every process inside (a `setsid` one too), and waits for it to be gone.
 */
import { Effect } from "effect"
import { createRequire } from "node:module"
import type * as Pty from "node-pty"
import type { Command } from "./Sandbox.ts"

// node-pty is a native CommonJS addon.
const pty = createRequire(import.meta.url)("node-pty") as typeof Pty

export interface StepOptions {
  readonly command: Command
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly onOutput: (text: string) => void
}

/** The shell's exit code (128 + signal when a signal ended it). */
export const runStep = (options: StepOptions): Effect.Effect<number> =>
  Effect.callback<number>((resume) => {
    let child: Pty.IPty
    try {
      const { file, args, user } = options.command
      child = pty.spawn(file, [...args], {
        name: "xterm",
        cols: 120,
        rows: 40,
        cwd: options.cwd,
        env: { ...options.env },
        ...(user === undefined ? {} : { uid: user.uid, gid: user.gid })
      })
    } catch (error) {
      options.onOutput(`grove: the step could not be started: ${String(error)}\n`)
      resume(Effect.succeed(127))
      return
    }
    let exited = false
    // node-pty (1.1.0, pinned) reports the exit only once the terminal's read side has closed (every
    // holder of the pty gone: the sandbox's PID namespace ended, so nothing is left to write) and
    // its last output was delivered: that is the end of the output, no quiet period to wait out.
    const exit = new Promise<void>((done) => {
      child.onExit(({ exitCode, signal }) => {
        exited = true
        done()
        resume(Effect.succeed(signal !== undefined && signal !== 0 ? 128 + signal : exitCode))
      })
    })
    child.onData((data) => {
      options.onOutput(data.replace(/\r\n/g, "\n"))
    })
    // Interrupted: kill the whole process group, then wait until the shell has exited.
    return Effect.promise(async () => {
      if (exited) return
      killGroup(child.pid)
      await Promise.race([exit, new Promise((done) => setTimeout(done, 5000))])
    })
  })

const killGroup = (pid: number) => {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, "SIGKILL")
    } catch {
      // Already gone.
    }
  }
}
