/**
 * The real `grove` writing into output it cannot write: a full disk (`> /dev/full`, ENOSPC) is one line on stderr and
 * exit 1, never a stack or a silent 0; a reader that went away (`grove log | head -1`, EPIPE) is quiet, as git is, and
 * not 0. Every way output goes: the quick answers (`--version`, an unchanged `status`), the command tree's (help,
 * plain, --json), status, log and diff.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { CLI_BIN, type GroveServer } from "../support/GroveServer.ts"
import { type GroveOptions, ok, startSuiteServer, stopSuiteServers, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions
let checkout: string

beforeAll(async () => {
  server = await startSuiteServer()
  alice = userOf(server, "alice", await server.createUser("alice"))
  await ok(["repo", "create", "out"], alice)
  checkout = path.join(alice.home, "out")
  await ok(["clone", "alice/out", checkout], alice)
  for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(checkout, `f${i}.txt`), `line ${i}\n`)
  await ok(["push"], { ...alice, cwd: checkout })
}, 300_000)

afterAll(stopSuiteServers)

/** `grove args` with stdout on /dev/full, or on a pipe whose reader has gone. */
const runInto = (args: ReadonlyArray<string>, into: "full" | "closed pipe") =>
  new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    const full = into === "full" ? fs.openSync("/dev/full", "w") : undefined
    const child = spawn(process.execPath, [CLI_BIN, ...args], {
      cwd: checkout,
      env: { HOME: alice.home, PATH: "", ...alice.env },
      stdio: ["ignore", full ?? "pipe", "pipe"]
    })
    if (full !== undefined) fs.closeSync(full)
    // Closed before the client writes a byte: its writes fail with EPIPE.
    child.stdout?.destroy()
    let stderr = ""
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stderr })
    })
  })

const expectFailures = async (args: ReadonlyArray<string>) => {
  expect({ args, ...(await runInto(args, "full")) }).toEqual({
    args,
    code: 1,
    stderr: "grove: cannot write the output: no space left on device (ENOSPC)\n"
  })
  expect({ args, ...(await runInto(args, "closed pipe")) }).toEqual({ args, code: 1, stderr: "" })
}

describe("output that cannot be written", () => {
  it("unchanged checkout: --version, --help, status (the quick answer), status --json, log, log --json, repo list", async () => {
    for (const args of [["--version"], ["--help"], ["status"], ["status", "--json"], ["log"], ["log", "--json"], ["repo", "list"]]) {
      await expectFailures(args)
    }
  }, 300_000)

  it("with changes: status, status --json, diff, diff --json", async () => {
    fs.appendFileSync(path.join(checkout, "f1.txt"), "more\n")
    fs.writeFileSync(path.join(checkout, "new.txt"), "new\n")
    for (const args of [["status"], ["status", "--json"], ["diff"], ["diff", "--json"]]) await expectFailures(args)
  }, 300_000)
})
