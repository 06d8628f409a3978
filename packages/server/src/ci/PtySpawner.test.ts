import { afterAll, describe, expect, it } from "@effect/vitest"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { makeSpawner, PtySpawner, type Terminal } from "./PtySpawner.ts"

// One process starter for the file, as a server has one.
const spawner = makeSpawner()
afterAll(() => spawner.close())
const spawnTerminal = spawner.spawn
const helperPid = spawner.pid

/** Neither gone nor a zombie. A process reaped between two reads of /proc is gone, not an error. */
const alive = (pid: number) => {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
  } catch {
    return false
  }
}

/**
 * Polls until a process is gone (no event tells it for a process not this one's child). Its deadline is only a
 * cap under the test's timeout: a 10 s one failed at load ~20. Output is awaited as an event (`gathered().seen`).
 */
const until = async (check: () => boolean) => {
  const end = Date.now() + 50_000
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out")
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Output as it comes; `seen` resolves at the chunk after which it passes `test`. */
const gathered = () => {
  let output = ""
  const waiting: Array<() => void> = []
  return {
    add: (text: string) => {
      output += text
      for (const listener of waiting) listener()
    },
    output: () => output,
    seen: (test: (text: string) => boolean) =>
      new Promise<void>((resolve) => {
        if (test(output)) resolve()
        else waiting.push(() => test(output) && resolve())
      })
  }
}

/** A shell in a terminal: its output (and when it first passes a test) and its end. */
const shell = (script: string) => {
  const output = gathered()
  const terminal: Terminal = spawnTerminal("/bin/sh", ["-c", script], { cwd: os.tmpdir(), env: { PATH: "/usr/bin:/bin" } })
  terminal.onData(output.add)
  const exit = new Promise<{ exitCode: number; signal: number }>((resolve) => terminal.onExit(resolve))
  return { terminal, exit, output: output.output, seen: output.seen }
}

describe("PtySpawner", () => {
  it("relays a terminal's output from its first byte, then its exit, with exactly its environment", async () => {
    const names = "env | cut -d= -f1 | sort | tr '\\n' ,"
    const step = shell(`printf 'first|%s|' "$PATH"; ${names}; exit 3`)
    expect(await step.exit).toEqual({ exitCode: 3, signal: 0 })
    // The same shell started with that environment and the terminal's TERM alone (it adds PWD and the like of its own).
    const alone = execFileSync("/bin/sh", ["-c", names], { cwd: os.tmpdir(), env: { PATH: "/usr/bin:/bin", TERM: "xterm" }, encoding: "utf8" })
    expect(step.output()).toBe(`first|/usr/bin:/bin|${alone}`)
  })

  it("relays U+2028 and U+2029 in output and in the environment intact (JSON leaves them raw; they end no line)", async () => {
    const helper = helperPid()
    let output = ""
    const terminal = spawnTerminal("/bin/sh", ["-c", "printf 'a\\342\\200\\250b|%s|\\n' \"$ODD\""], {
      cwd: os.tmpdir(),
      env: { PATH: "/usr/bin:/bin", ODD: "c\u2029d" }
    })
    terminal.onData((text) => (output += text))
    expect(await new Promise((resolve) => terminal.onExit(resolve))).toEqual({ exitCode: 0, signal: 0 })
    expect(output).toBe("a\u2028b|c\u2029d|\r\n")
    // The same helper: neither side took the line apart and gave up.
    if (helper !== undefined) expect(helperPid()).toBe(helper)
  })

  it("holds a step back while its output is not taken, and loses none of it", async () => {
    // 48 MiB through the terminal while this process does not read for 4 s: the helper must not queue it (its heap
    // is 32 MiB: it died of it, and its steps with it), and every byte arrives, in order.
    const size = 48 * 1024 * 1024
    let received = 0
    let last = ""
    let stalled = false
    const terminal = spawnTerminal("/bin/sh", ["-c", `head -c ${size} /dev/zero | tr '\\0' x; printf 'END'`], { cwd: os.tmpdir(), env: { PATH: "/usr/bin:/bin" } })
    terminal.onData((text) => {
      received += text.length
      last = (last + text).slice(-3)
      if (stalled) return
      stalled = true
      const until = Date.now() + 4000
      while (Date.now() < until) {
        // Not reading.
      }
    })
    expect(await new Promise((resolve) => terminal.onExit(resolve))).toEqual({ exitCode: 0, signal: 0 })
    expect(last).toBe("END")
    expect(received).toBe(size + 3)
  }, 180_000)

  it("keeps the last output of a step that exits while its output is held back", async () => {
    // One step's 4 MiB while this process does not read for 2 s: the helper pauses every terminal, and another step
    // prints and exits meanwhile. node-pty destroyed a terminal not closed 200 ms after its exit: its output was lost.
    let stalled = false
    const big = spawnTerminal("/bin/sh", ["-c", "head -c 4194304 /dev/zero | tr '\\0' x"], { cwd: os.tmpdir(), env: { PATH: "/usr/bin:/bin" } })
    big.onData(() => {
      if (stalled) return
      stalled = true
      const until = Date.now() + 2000
      while (Date.now() < until) {
        // Not reading.
      }
    })
    const bigExit = new Promise((resolve) => big.onExit(resolve))
    const small = shell("sleep 0.3; printf small-end")
    expect(await small.exit).toEqual({ exitCode: 0, signal: 0 })
    expect(small.output()).toBe("small-end")
    expect(stalled).toBe(true)
    expect(await bigExit).toEqual({ exitCode: 0, signal: 0 })
  }, 60_000)

  it("starts a terminal with no descriptor but its own three (not another terminal's master)", async () => {
    const other = shell("echo up; sleep 100")
    await other.seen((text) => text.includes("up"))
    // The shell's own descriptors, listed by ls (a pipeline would add the shell's pipe ends).
    const step = shell("ls -1 /proc/$$/fd")
    expect(await step.exit).toEqual({ exitCode: 0, signal: 0 })
    expect(step.output().split(/\s+/).filter((fd) => fd !== "")).toEqual(["0", "1", "2"])
    other.terminal.kill()
    await other.exit
  })

  it("kills a terminal's whole process group", async () => {
    const step = shell("sleep 100 & echo $!; wait")
    await step.seen((text) => /\d+\r\n/.test(text))
    const background = Number(step.output().trim())
    expect(alive(background)).toBe(true)
    step.terminal.kill()
    expect(await step.exit).toEqual({ exitCode: 0, signal: 9 })
    await until(() => !alive(background))
  })

  it("ends the terminals of a helper that died as killed, and starts a new helper for the next", async () => {
    const before = shell("echo up; sleep 100")
    await before.seen((text) => text.includes("up"))
    const first = helperPid()!
    process.kill(first, "SIGKILL")
    expect((await before.exit).signal).toBe(9)
    expect(before.output()).toContain("the CI process starter ended (SIGKILL)")
    const after = shell("echo again")
    expect(await after.exit).toEqual({ exitCode: 0, signal: 0 })
    expect(after.output()).toContain("again")
    expect(helperPid()).not.toBe(first)
  })

  it("ends its helper and every process the helper started when the server ends, however", async () => {
    // A stand-in server: starts a terminal, prints the helper's pid and what the terminal prints (its shell's pid).
    const server = spawn(process.execPath, [
      "--input-type=module",
      "-e",
      `import { makeSpawner } from ${JSON.stringify(new URL("./PtySpawner.ts", import.meta.url).href)}
       const spawner = makeSpawner()
       const terminal = spawner.spawn("/bin/sh", ["-c", "echo $$; exec sleep 100"], { cwd: "/", env: {} })
       terminal.onData((text) => process.stdout.write(spawner.pid() + " " + text))`
    ], { stdio: ["ignore", "pipe", "inherit"] })
    const printed = gathered()
    server.stdout.on("data", (chunk) => printed.add(String(chunk)))
    // Its start (Node, the type stripper, effect, then the helper and node-pty) took 6-9 s at load 16.
    await printed.seen((text) => /^\d+ \d+\r?\n/.test(text))
    const [helper, sleeper] = printed.output().trim().split(" ").map(Number) as [number, number]
    expect(alive(helper) && alive(sleeper)).toBe(true)
    server.kill("SIGKILL")
    await until(() => !alive(helper) && !alive(sleeper))
  })

  it("starts its helper ahead of the first terminal, and ends it and every group it started when its layer closes", async () => {
    const scope = Scope.makeUnsafe()
    const own = Context.get(await Effect.runPromise(Layer.buildWithScope(PtySpawner.layer, scope)), PtySpawner)
    expect(own.pid()).toBeUndefined()
    own.start()
    const helper = own.pid()!
    expect(alive(helper)).toBe(true)
    const output = gathered()
    const terminal = own.spawn("/bin/sh", ["-c", "sleep 100 & echo $!; wait"], { cwd: os.tmpdir(), env: { PATH: "/usr/bin:/bin" } })
    terminal.onData(output.add)
    const exit = new Promise<{ exitCode: number; signal: number }>((resolve) => terminal.onExit(resolve))
    await output.seen((text) => /\d+\r\n/.test(text))
    // The same helper: started once, ahead.
    expect(own.pid()).toBe(helper)
    const background = Number(output.output().trim())
    await Effect.runPromise(Scope.close(scope, Exit.void))
    expect((await exit).signal).toBe(9)
    await until(() => !alive(helper) && !alive(background))
    expect(own.pid()).toBeUndefined()
  })
})
