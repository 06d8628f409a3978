/**
 * The command examples of the READMEs, so a documented form cannot break again: every `grove ...`
 * line of their `sh` blocks is run through the real binary and must parse (a usage error of the
 * command line prints the help; a command that parsed goes on to its checkout or server), and the
 * CI forms (`grove ci logs -f 1`, the `Follow with ...` line `grove ci trigger` prints, `grove ci wait 1`,
 * `grove ci runs`) run verbatim against a real server.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { ROOT, type GroveServer } from "../support/GroveServer.ts"
import { at, type GroveOptions, ok, spawnGrove, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

interface Example {
  readonly file: string
  readonly line: string
  readonly env: Record<string, string>
  readonly args: ReadonlyArray<string>
}

/** Words of a shell line: double and single quotes group, nothing else is interpreted. */
const words = (line: string): Array<string> => [...line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!)

/** Every `grove` command of the `sh` blocks (each part of an `&&` chain), with its leading VAR=value words. */
const examples = (file: string): Array<Example> => {
  const text = fs.readFileSync(path.join(ROOT, file), "utf8")
  const out: Array<Example> = []
  for (const [, block] of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const raw of block!.split("\n")) {
      for (const part of raw.replace(/\s+#.*$/, "").split("&&")) {
        const all = words(part.trim())
        const env: Record<string, string> = {}
        while (all.length > 0 && /^[A-Z_]+=/.test(all[0]!)) {
          const [name, ...value] = all.shift()!.split("=")
          env[name!] = value.join("=")
        }
        if (all[0] === "grove") out.push({ file, line: part.trim(), env, args: all.slice(1) })
      }
    }
  }
  return out
}

const EXAMPLES = [...examples("README.md"), ...examples("packages/cli/README.md")]

let server: GroveServer
let user: GroveOptions
let offline: string

beforeAll(async () => {
  // A port nothing listens on: a command that parsed fails to connect (exit 6) instead of reaching a real server.
  const probe = net.createServer()
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
  offline = `http://127.0.0.1:${(probe.address() as net.AddressInfo).port}`
  await new Promise((resolve) => probe.close(resolve))
  server = await startSuiteServer()
  user = userOf(server, "alice", await server.createUser("alice"))
}, 300_000)

afterAll(stopSuiteServers)

describe("the READMEs' grove examples", () => {
  it("every documented form parses", async () => {
    expect(EXAMPLES.length).toBeGreaterThan(20)
    for (const lines of ["grove ci logs -f 1", "grove branch list", "grove org list", "grove key create laptop --scope read"]) {
      expect(EXAMPLES.map((e) => e.line)).toContain(lines)
    }
    for (const example of EXAMPLES) {
      const home = tempDir("home")
      const args = example.args.map((arg) => arg.replace("http://127.0.0.1:8080", offline).replace(/^<commit>$/, "1234567"))
      // A browser login waits for its callback (killed after 15 s): it parsed once it says so.
      const login = args[0] === "login" && !args.includes("--headless")
      const running = spawnGrove(args, { home, env: { GROVE_REMOTE: offline, ...example.env } }, login ? 15_000 : 30_000)
      if (login) await running.waitForStderr(/Waiting for the browser/, 15_000)
      const run = await running.done
      const where = `${example.file}: ${example.line}\n${run.stdout}${run.stderr}`
      expect(run.stderr, where).not.toMatch(/^USAGE$|Missing required argument|Unrecognized flag|Unknown subcommand|Unexpected positional|Invalid value for/m)
      if (!login) expect([0, 1, 2, 6], where).toContain(run.code)
    }
  }, 240_000)

  it("the CI forms run verbatim: grove ci logs -f 1, the Follow line grove ci trigger prints, grove ci wait 1, grove ci runs", async () => {
    const documented = (line: string) => {
      const example = EXAMPLES.find((e) => e.line === line)
      expect(example, `the README shows ${line}`).toBeDefined()
      return example!.args
    }
    const work = tempDir("work")
    fs.mkdirSync(path.join(work, ".oak/workflows"), { recursive: true })
    fs.writeFileSync(path.join(work, ".oak/workflows/build.yml"), "jobs:\n  build:\n    steps:\n      - run: echo built $GROVE_EVENT\n")
    await ok(["init", "--name", "forms"], at(user, work))
    await ok(["push"], at(user, work))

    // The push started run 1 (branch.created); follow it as the README says.
    const followed = await ok(documented("grove ci logs -f 1"), at(user, work))
    expect(followed.stdout).toContain("built branch.created")
    expect((await ok(documented("grove ci wait 1"), at(user, work))).stdout).toContain("success")
    expect((await ok(documented("grove ci runs"), at(user, work))).stdout).toMatch(/^1\s+success\s+build\s+branch\.created/m)

    const triggered = await ok(documented("grove ci trigger --workflow build"), at(user, work))
    const follow = /Follow with (grove ci logs -f \d+)/.exec(triggered.stdout)
    expect(follow, triggered.stdout).not.toBeNull()
    const printed = await ok(follow![1]!.split(" ").slice(1), at(user, work))
    expect(printed.stdout).toContain("built manual")
  }, 240_000)
})
