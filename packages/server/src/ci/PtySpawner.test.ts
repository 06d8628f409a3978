import { describe, expect, it } from "@effect/vitest"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { helperPid, spawnTerminal, type Terminal } from "./PtySpawner.ts"

const alive = (pid: number) => fs.existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"))

const until = async (check: () => boolean, ms = 10_000) => {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out")
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** A shell in a terminal: its output and its end. */
const shell = (script: string) => {
  let output = ""
  const terminal: Terminal = spawnTerminal("/bin/sh", ["-c", script], { cwd: os.tmpdir(), env: { PATH: "/usr/bin:/bin" } })
  terminal.onData((text) => (output += text))
  const exit = new Promise<{ exitCode: number; signal: number }>((resolve) => terminal.onExit(resolve))
  return { terminal, exit, output: () => output }
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

  it("kills a terminal's whole process group", async () => {
    const step = shell("sleep 100 & echo $!; wait")
    await until(() => /\d+\r\n/.test(step.output()))
    const background = Number(step.output().trim())
    expect(alive(background)).toBe(true)
    step.terminal.kill()
    expect(await step.exit).toEqual({ exitCode: 0, signal: 9 })
    await until(() => !alive(background))
  })

  it("ends the terminals of a helper that died as killed, and starts a new helper for the next", async () => {
    const before = shell("echo up; sleep 100")
    await until(() => before.output().includes("up"))
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
      `import { helperPid, spawnTerminal } from ${JSON.stringify(new URL("./PtySpawner.ts", import.meta.url).href)}
       const terminal = spawnTerminal("/bin/sh", ["-c", "echo $$; exec sleep 100"], { cwd: "/", env: {} })
       terminal.onData((text) => process.stdout.write(helperPid() + " " + text))`
    ], { stdio: ["ignore", "pipe", "inherit"] })
    let printed = ""
    server.stdout.on("data", (chunk) => (printed += String(chunk)))
    await until(() => /^\d+ \d+\r?\n/.test(printed))
    const [helper, sleeper] = printed.trim().split(" ").map(Number) as [number, number]
    expect(alive(helper) && alive(sleeper)).toBe(true)
    server.kill("SIGKILL")
    await until(() => !alive(helper) && !alive(sleeper))
  })
})
