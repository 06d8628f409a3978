/**
 * `grove ci` end to end with the real binary against the embedded server: a pushed checkout's
 * workflows run (branch.created), `runs`, `show`, `wait`, `logs` and `logs -f`, `trigger`,
 * `cancel`, secrets from stdin, the job cache restored from main's, and `grove merge --wait`
 * waiting on a real run.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { hostAddress } from "../support/hostNetwork.ts"
import { at, grove, type GroveOptions, json, ok, spawnGrove, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let ada: GroveOptions
let work: string

/**
 * build runs of `push` events wait until the test opens this gate, so merge --wait surely finds one still
 * running: the step reads a line from a port on the machine's non-loopback address (a step's network
 * reaches that, not the host's loopback nor its /tmp).
 */
let gateOpen = false
const waiting: Array<net.Socket> = []
const gate = net.createServer((socket) => {
  socket.on("error", () => undefined)
  if (gateOpen) socket.end("go\n")
  else waiting.push(socket)
})
const GATE_HOST = hostAddress()
if (GATE_HOST === undefined) throw new Error("this machine has no non-loopback IPv4 address for the CI gate")
await new Promise<void>((resolve) => gate.listen(0, GATE_HOST, resolve))
const GATE_PORT = (gate.address() as net.AddressInfo).port
const openGate = () => {
  gateOpen = true
  for (const socket of waiting.splice(0)) socket.end("go\n")
}

const WORKFLOWS: Record<string, string> = {
  ".oak/workflows/build.yml": [
    "jobs:",
    "  build:",
    "    cache:",
    "      key: deps-v1",
    "      paths: [deps]",
    "    steps:",
    "      - name: restore or build the dependencies",
    "        run: |",
    "          if [ -f deps/built.txt ]; then echo \"deps restored: $(cat deps/built.txt)\"; else mkdir -p deps; echo \"$GROVE_BRANCH\" > deps/built.txt; echo deps built; fi",
    `      - run: if [ "$GROVE_EVENT" = push ]; then exec 3<>/dev/tcp/${GATE_HOST}/${GATE_PORT}; read -r go <&3; fi; echo built with $DEPLOY_TOKEN`
  ].join("\n"),
  ".oak/workflows/broken.yml": ["on: manual", "jobs:", "  a:", "    steps:", "      - run: echo about to fail; exit 3"].join("\n"),
  ".oak/workflows/long.yml": ["on: manual", "jobs:", "  a:", "    steps:", "      - run: for i in $(seq 1 100); do echo line $i; sleep 0.2; done"].join("\n"),
  "README.md": "hello\n"
}

const runsOf = async (filter: (run: any) => boolean) => {
  const deadline = Date.now() + 60_000
  for (;;) {
    const listed = json(await ok(["ci", "runs", "--json", "--limit", "50"], at(ada, work))).filter(filter)
    if (listed.length > 0) return listed
    if (Date.now() > deadline) throw new Error("no run appeared")
    await new Promise((resolve) => setTimeout(resolve, 300))
  }
}

beforeAll(async () => {
  server = await startSuiteServer()
  ada = userOf(server, "ada", await server.createUser("ada"))
  work = tempDir("work")
}, 300_000)

afterAll(async () => {
  await stopSuiteServers()
  for (const socket of waiting) socket.destroy()
  gate.close()
})

describe("grove ci", () => {
  it("secrets, runs, wait, logs, trigger, cancel, the cache, and merge --wait on a real run", async () => {
    await ok(["init", "--name", "garden"], at(ada, work))
    for (const [file, text] of Object.entries(WORKFLOWS)) {
      fs.mkdirSync(path.dirname(path.join(work, file)), { recursive: true })
      fs.writeFileSync(path.join(work, file), text)
    }
    await ok(["push"], at(ada, work))
    // The value is read from stdin, never echoed; runs queued from now on get it.
    await ok(["ci", "secrets", "set", "DEPLOY_TOKEN"], { ...at(ada, work), input: "tok-1234567890\n" })
    const secrets = json(await ok(["ci", "secrets", "list", "--json"], at(ada, work))).secrets
    expect(secrets.map((s: any) => s.name)).toEqual(["DEPLOY_TOKEN"])
    expect(JSON.stringify(secrets)).not.toContain("tok-1234567890")

    // The push created the branch: build.yml (every event) runs on branch.created.
    const [first] = await runsOf((run) => run.workflow_name === "build")
    expect(first).toMatchObject({ event: "branch.created" })
    const waited = await ok(["ci", "wait", String(first.id), "--json"], at(ada, work))
    expect(json(waited)).toMatchObject({ status: "completed", conclusion: "success" })
    const logs = await ok(["ci", "logs", String(first.id)], at(ada, work))
    expect(logs.stdout).toContain("deps built")
    expect((await ok(["ci", "show", String(first.id)], at(ada, work))).stdout).toMatch(/job build: success/)

    // A failing workflow: wait exits 1 and names the conclusion; the exit code is recorded.
    const broken = json(await ok(["ci", "trigger", "--workflow", "broken", "--json"], at(ada, work))).run_ids[0]
    const failed = await grove(["ci", "wait", String(broken)], at(ada, work))
    expect(failed.code).toBe(1)
    expect(failed.stderr).toContain("concluded failure")
    expect(json(await ok(["ci", "show", String(broken), "--json"], at(ada, work))).jobs[0].steps[0].exit_code).toBe(3)

    // Follow a long run live, then cancel it from another process: the follower ends with the cancel.
    const long = json(await ok(["ci", "trigger", "--workflow", "long", "--json"], at(ada, work))).run_ids[0]
    const follower = spawnGrove(["ci", "logs", "-f", String(long)], at(ada, work), 60_000)
    const deadline = Date.now() + 30_000
    while (!follower.stdout().includes("line 3\n") && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
    expect(follower.stdout()).toContain("line 3\n")
    await ok(["ci", "cancel", String(long)], at(ada, work))
    const followed = await follower.done
    expect(followed.code).toBe(1)
    expect(followed.stderr).toContain(`Run ${long}: cancelled`)
    const again = await grove(["ci", "cancel", String(long), "--json"], at(ada, work))
    expect(again.code).toBe(1)
    expect(json(again)).toMatchObject({ status: 409, code: "run_finished" })

    // The exact-head trigger: a stale head is refused, the right one starts once per key.
    const head = json(await ok(["status", "--json"], at(ada, work))).head
    const stale = await grove(["ci", "trigger", "--workflow", "broken", "--expected-commit", "0".repeat(64), "--json"], at(ada, work))
    expect(json(stale)).toMatchObject({ status: 412 })
    const exact = ["ci", "trigger", "--workflow", "broken", "--expected-commit", head, "--idempotency-key", "k1", "--json"]
    const one = json(await ok(exact, at(ada, work)))
    expect(json(await ok(exact, at(ada, work)))).toEqual({ ...one, replayed: true })

    // merge --wait waits on the branch head's real runs: broken failed there, so start over with a passing run.
    const pushed = path.join(work, ".oak/workflows/broken.yml")
    fs.writeFileSync(pushed, ["on: manual", "jobs:", "  a:", "    steps:", "      - run: echo fixed"].join("\n"))
    await ok(["push"], at(ada, work))
    const [building] = await runsOf((run) => run.workflow_name === "build" && run.event === "push")
    const merging = spawnGrove(["merge", "--wait=2", "--json"], { ...at(ada, work), env: { ...ada.env!, GROVE_MERGE_POLL_SECONDS: "1" } }, 120_000)
    await merging.waitForStderr(/CI on .* is still running; waiting until it passes/, 60_000)
    expect(json(await ok(["ci", "show", String(building.id), "--json"], at(ada, work))).status).not.toBe("completed")
    openGate()
    const merged = await merging.done
    expect(merged.code, merged.stderr).toBe(0)
    expect(json(merged).commit_hash).toMatch(/^[0-9a-f]{64}$/)
    expect(json(await ok(["ci", "show", String(building.id), "--json"], at(ada, work))).conclusion).toBe("success")
    const buildLogs = (await ok(["ci", "logs", String(building.id)], at(ada, work))).stdout
    expect(buildLogs).toContain("built with ***")
    expect(buildLogs).not.toContain("tok-1234567890")

    // The merge ran build on main, which saved main's cache; a new branch's first run restores it.
    const [onMain] = await runsOf((run) => run.workflow_name === "build" && run.event === "merge")
    await ok(["ci", "wait", String(onMain.id)], at(ada, work))
    fs.writeFileSync(path.join(work, "README.md"), "hello again\n")
    await ok(["push"], at(ada, work))
    const branch = json(await ok(["status", "--json"], at(ada, work))).branch
    const [fresh] = await runsOf((run) => run.workflow_name === "build" && run.branch === branch)
    await ok(["ci", "wait", String(fresh.id)], at(ada, work))
    expect((await ok(["ci", "logs", String(fresh.id)], at(ada, work))).stdout).toContain("deps restored: main")

    await ok(["ci", "secrets", "delete", "DEPLOY_TOKEN"], at(ada, work))
    expect(json(await ok(["ci", "secrets", "list", "--json"], at(ada, work)))).toEqual({ secrets: [] })
    const usage = await grove(["ci", "show", "abc"], at(ada, work))
    expect(usage.code).toBe(2)
  }, 240_000)
})
