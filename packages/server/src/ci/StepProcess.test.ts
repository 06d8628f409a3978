import { afterAll, describe, expect, it } from "@effect/vitest"
import { vi } from "vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type Exit, makeSpawner, PtySpawner, type Spawner } from "./PtySpawner.ts"
import { jobUser, probe, stepCommand, WARM_READY, warmCommand, warmStepLine } from "./Sandbox.ts"
import { RUNNER_LANG, stepEnvironment } from "./StepEnvironment.ts"
import { prepareStep, runStep } from "./StepProcess.ts"
import { WAITING_ENV } from "./WarmSandboxes.ts"

const settings = { runAsUser: "nobody", uidBase: 200_000, unsafeSharedRunner: false }
// One process starter for the file, as a server has one.
const spawner = makeSpawner()
afterAll(() => spawner.close())

/**
 * Runs `script` as a step in a real sandbox (network on, as by default): its exit code, its output, when each came.
 * `warm`: in a sandbox started ahead of it (WarmSandboxes), told its step through the terminal.
 */
const sandboxedStep = (script: string, envIn: (workspace: string) => Record<string, string> = () => ({ PATH: "/usr/bin:/bin" }), warm = false) =>
  Effect.scoped(Effect.gen(function*() {
    const found = yield* probe(settings)
    if (found._tag !== "Ready") return yield* Effect.die(new Error(`no sandbox on this machine: ${found.reason}`))
    const user = yield* jobUser(found.isolation)
    const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "grove-step-test-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(workspace, { recursive: true, force: true })))
    if (user !== undefined) fs.chownSync(workspace, user.uid, user.gid)
    const env = envIn(workspace)
    let output = ""
    let exitedAtEnd: boolean | undefined
    if (warm) {
      const waitingCommand = yield* warmCommand(found.isolation, user, workspace)
      const waiting = yield* Effect.promise(() => prepareStep(spawner, waitingCommand, workspace, WAITING_ENV, WARM_READY))
      const code = yield* waiting.run(warmStepLine(env, workspace, script), (text) => (output += text))
      return { code, output, workspace, exitedAtEnd }
    }
    const command = yield* stepCommand(found.isolation, user, workspace, true, script, env)
    const code = yield* runStep({
      command,
      cwd: workspace,
      env: stepEnvironment(env),
      onOutput: (text) => (output += text),
      onEnd: (exited) => (exitedAtEnd = exited)
    })
    return { code, output, workspace, exitedAtEnd }
  })).pipe(Effect.provideService(PtySpawner, spawner))

/** Processes whose command line names `text` (a step's workspace: pasta's and bwrap's arguments hold it). */
const processesWith = (text: string) =>
  fs.readdirSync("/proc").filter((pid) => /^\d+$/.test(pid) && (() => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").includes(text)
    } catch {
      return false
    }
  })())

describe("StepProcess", () => {
  it.effect("delivers every byte a step prints right before it exits, with its exit code", () =>
    Effect.gen(function*() {
      // 200 KB, then the last line, then the exit: ten times, a few at once.
      const script = "head -c 200000 /dev/zero | tr '\\0' x; echo; echo the-last-line; exit 3"
      const results = yield* Effect.forEach(Array.from({ length: 10 }), () => sandboxedStep(script), { concurrency: 3 })
      for (const { code, output } of results) {
        expect(code).toBe(3)
        expect(output.split("x").length - 1).toBe(200_000)
        expect(output.trimEnd().endsWith("the-last-line")).toBe(true)
      }
    }), 120_000)

  it.effect("reports a network-on step's exit before pasta's teardown ends, and waits for that before its scope ends", () =>
    Effect.gen(function*() {
      // pasta's exit (the kernel removing its tap device and namespace) took 10-40 ms after the step's;
      // the step's end came only after it. Now its exit status comes through the terminal, and the rest
      // is awaited when the scope closes (before the job's host user is given back).
      // Whether pasta had exited is read from the step's own process (its exit reported by node-pty only after
      // the pty's last output, so after the marker), not from /proc: a descheduled test could miss its teardown.
      for (let i = 0; i < 3; i++) {
        const { code, exitedAtEnd, workspace } = yield* sandboxedStep("exit 4")
        expect(code).toBe(4)
        expect(exitedAtEnd).toBe(false)
        expect(processesWith(workspace)).toEqual([])
      }
    }), 120_000)

  it.effect("tells a step's end by its exit marker from one by its exit, when both come in the same turn", () =>
    Effect.gen(function*() {
      // At load the helper's marker line and exit line often arrive in one chunk, handled in one turn: the end
      // came from the marker all the same (the step's process had not exited when it was reported).
      const marker = "\x1b]grove-exit;m;"
      const ended = (output: string, exitCode: number) => {
        const fake: Spawner = {
          spawn: () => {
            let data: (text: string) => void = () => undefined
            let exit: (exit: Exit) => void = () => undefined
            setImmediate(() => {
              data(output)
              exit({ exitCode, signal: 0 })
            })
            return { onData: (on) => (data = on), onExit: (on) => (exit = on), write: () => undefined, kill: () => undefined }
          },
          start: () => undefined,
          pid: () => undefined,
          close: () => undefined
        }
        let exitedAtEnd: boolean | undefined
        let printed = ""
        return runStep({
          command: { file: "/bin/false", args: [], exitMarker: marker },
          cwd: os.tmpdir(),
          env: {},
          onOutput: (text) => (printed += text),
          onEnd: (exited) => (exitedAtEnd = exited)
        }).pipe(Effect.scoped, Effect.provideService(PtySpawner, fake), Effect.map((code) => ({ code, printed, exitedAtEnd })))
      }
      expect(yield* ended(`out${marker}4\x07`, 0)).toEqual({ code: 4, printed: "out", exitedAtEnd: false })
      expect(yield* ended("out", 3)).toEqual({ code: 3, printed: "out", exitedAtEnd: true })
    }))

  it.effect("keeps the exit code and output of a step that prints something like the exit marker", () =>
    Effect.gen(function*() {
      const fake = "\\033]grove-exit;00000000000000000000000000000000;0\\007"
      const { code, output } = yield* sandboxedStep(`printf '${fake}x\\033]grove-exi'; sleep 0.2; printf 'tail'; exit 5`)
      expect(code).toBe(5)
      expect(output).toBe("\x1b]grove-exit;00000000000000000000000000000000;0\x07x\x1b]grove-exitail")
    }), 60_000)

  it.effect("a step in a sandbox started ahead starts as a cold one: same variables, shell, options, first line", () =>
    Effect.gen(function*() {
      // What bash shows of itself (the values that change from one start to the next left out) and its own environ
      // block (sorted: bash's export order is its own; `_` and SHLVL are the waiting shell's exec's, reset at start).
      const script = [
        "echo $'\\u00e9' \"_=$_ line=$LINENO $# $0 $-\"",
        "declare -p | grep -v -E '^declare -[a-zA-Z-]* (BASHPID|RANDOM|SRANDOM|SECONDS|EPOCH|PPID|BASH_COMMAND|_=|LINENO)'",
        "env | sort; shopt; set -o; pwd; echo ${#BASH_EXECUTION_STRING}",
        "tr '\\0' '\\n' < /proc/$$/environ | grep -v -e '^_=' -e '^SHLVL=0$' | sort"
      ].join("\n")
      const plain = (workspace: string) => ({
        PATH: "/usr/local/bin:/usr/bin:/bin", HOME: workspace, LANG: RUNNER_LANG, TERM: "xterm", PWD: workspace,
        QUOTED: "a b'\"$(no) `no`\nsecond line", EMPTY: ""
      })
      // MAILCHECK: a shell of its own unpacks the variables (StepEnvironment.unpacksInShell), warm or cold.
      for (const envIn of [plain, (workspace: string) => ({ ...plain(workspace), MAILCHECK: "60" })]) {
        const cold = yield* sandboxedStep(script, envIn)
        const warm = yield* sandboxedStep(script, envIn, true)
        expect([warm.code, cold.code]).toEqual([0, 0])
        expect(warm.output.replaceAll(warm.workspace, "<workspace>")).toBe(cold.output.replaceAll(cold.workspace, "<workspace>"))
        expect(cold.output.startsWith("é _=/bin/bash line=1 0 /bin/bash ehBc\n")).toBe(true)
        expect(cold.output).toContain("\ndeclare -x QUOTED=$'a b\\'\"$(no) `no`\\nsecond line'\n")
      }
    }), 120_000)

  it("reports the end at the exit after the last output, with no timer between them (no quiet period)", async () => {
    // The old runner waited until nothing had come for 40 ms after the exit. With the timers frozen, an end that waits
    // for one never comes; the exit (node-pty's, after the last output) must end the step within a few event-loop
    // turns. Turns, not milliseconds: the same at any load.
    type Listeners = { data: (text: string) => void; exit: (exit: Exit) => void }
    let terminal: Listeners | undefined
    const fake: Spawner = {
      spawn: () => {
        const listeners: Listeners = { data: () => undefined, exit: () => undefined }
        terminal = listeners
        return { onData: (on) => (listeners.data = on), onExit: (on) => (listeners.exit = on), write: () => undefined, kill: () => undefined }
      },
      start: () => undefined,
      pid: () => undefined,
      close: () => undefined
    }
    const turn = () => new Promise((done) => setImmediate(done))
    const seen: Array<string> = []
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date", "performance"] })
    try {
      void Effect.runPromise(runStep({ command: { file: "/bin/true", args: [] }, cwd: os.tmpdir(), env: {}, onOutput: (text) => seen.push(`output ${text}`) }).pipe(
        Effect.scoped,
        Effect.provideService(PtySpawner, fake)
      )).then((code) => seen.push(`end ${code}`))
      for (let i = 0; i < 100 && terminal === undefined; i++) await turn()
      terminal!.data("done\r\n")
      terminal!.exit({ exitCode: 3, signal: 0 })
      for (let i = 0; i < 100 && seen.length < 2; i++) await turn()
      expect(seen).toEqual(["output done\n", "end 3"])
    } finally {
      vi.useRealTimers()
    }
  })
})
