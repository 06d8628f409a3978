/**
 * A client that survives interruption: `grove push` killed (SIGKILL, through the test-only
 * `GROVE_TEST_CRASH_AT`) at each of its phases, then run again, publishes everything and leaves
 * the server and the checkout in agreement; and a push never trusts local bookkeeping about which
 * trees the server has.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { at, grove, type GroveOptions, json, listing, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions

beforeAll(async () => {
  server = await startSuiteServer()
  alice = userOf(server, "alice", await server.createUser("alice"))
}, 300_000)

afterAll(stopSuiteServers)

const write = (root: string, files: Record<string, string | Buffer>) => {
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true })
    fs.writeFileSync(path.join(root, name), text)
  }
}

/** The checkout's files equal a fresh clone of its branch, and nothing is left unpushed. */
const expectConverged = async (work: string, name: string, branch: string) => {
  const status = await ok(["status", "--json"], at(alice, work))
  expect(json(status)).toMatchObject({ branch, changes: [], unpushed: 0 })
  const parent = tempDir("clone")
  await ok(["clone", `alice/${name}`, "copy", "--branch", branch], at(alice, parent))
  expect(listing(path.join(parent, "copy"))).toEqual(listing(work))
}

const PHASES = ["commit:trees", "commit:blobs", "commit:saved", "push:repository", "push:uploaded", "push:sent"] as const

describe("grove push, interrupted", () => {
  it.each(PHASES)("killed at %s, on the first push and on a later one: pushing again converges", async (phase) => {
    const work = tempDir("work")
    const name = `crash-${phase.replace(":", "-")}`
    const branch: string = json(await ok(["init", "--name", name, "--json"], at(alice, work))).branch
    const crash = { ...alice, cwd: work, env: { ...alice.env, GROVE_TEST_CRASH_AT: phase } }

    write(work, { "README.md": "# Crash\n", "src/deep/leaf.txt": "one\n", "src/other.txt": "other\n" })
    // Around the upload, a file large enough to travel as FastCDC chunks too.
    if (phase.startsWith("push:")) write(work, { "data/big.bin": randomBytes(11 * 1024 * 1024) })
    const killed = await grove(["push"], crash)
    expect(killed.code, killed.stdout + killed.stderr).not.toBe(0)
    await ok(["push"], at(alice, work))
    await expectConverged(work, name, branch)

    // A later push, over a published head, killed at the same point.
    write(work, { "src/deep/leaf.txt": "one\ntwo\n", "src/deep/new.txt": "new\n" })
    expect((await grove(["push"], crash)).code).not.toBe(0)
    const again = await ok(["push", "--json"], at(alice, work))
    expect(json(again)).toMatchObject({ branch })
    await expectConverged(work, name, branch)
  }, 120_000)
})

describe("grove push sends every tree the server lacks", () => {
  it("a commit left unpushed on one branch, the same files on a new branch: the push carries the shared trees", async () => {
    const work = tempDir("work")
    await ok(["init", "--name", "shared-trees"], at(alice, work))
    write(work, { "lib/util.txt": "shared\n", "README.md": "# Shared\n" })
    await ok(["commit"], at(alice, work))
    const created = await ok(["switch", "-c", "--json"], at(alice, work))
    const branch: string = json(created).branch
    write(work, { "lib/util.txt": "shared\n", "README.md": "# Shared\n" })
    const pushed = await grove(["push", "--json"], at(alice, work))
    expect(pushed.code, pushed.stdout + pushed.stderr).toBe(0)
    await expectConverged(work, "shared-trees", branch)
  }, 60_000)
})
