/**
 * Content through the real `grove` binary against the real server: init,
 * commit and push (which creates the repository), clone into another
 * directory with identical bytes and modes, push and pull between checkouts,
 * status, log and diff, desc and close as the server reports them, and a
 * conflicting concurrent edit (push refused, pull writes markers, exit 5).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { at, grove, type GroveOptions, json, listing, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions
let aliceKey: string

beforeAll(async () => {
  server = await startSuiteServer()
  aliceKey = await server.createUser("alice")
  alice = userOf(server, "alice", aliceKey)
}, 300_000)

afterAll(stopSuiteServers)


const api = async (pathname: string, init: RequestInit = {}) => {
  const response = await fetch(`${server.url}/api${pathname}`, {
    ...init,
    headers: { authorization: `Bearer ${aliceKey}`, "content-type": "application/json", ...init.headers }
  })
  return { status: response.status, body: await response.json().catch(() => undefined) as any }
}

describe("grove content commands", () => {
  const big = randomBytes(12 * 1024 * 1024)

  it("init, commit, push, clone: identical bytes and modes; then push and pull between checkouts", async () => {
    const work = tempDir("work")
    const init = await ok(["init", "--name", "atlas", "--json"], at(alice, work))
    expect(json(init)).toMatchObject({ name: "atlas", parent_branch: "main", user: "alice" })
    const branch: string = json(init).branch
    expect(branch).toMatch(/^alice-[0-9a-f]{6}$/)

    fs.mkdirSync(path.join(work, "src/deep/er"), { recursive: true })
    fs.writeFileSync(path.join(work, "README.md"), "# Atlas\n\nMaps.\n")
    fs.writeFileSync(path.join(work, "src/deep/er/leaf.txt"), "one\ntwo\nthree\n")
    fs.writeFileSync(path.join(work, "run.sh"), "#!/bin/sh\necho run\n", { mode: 0o755 })
    fs.symlinkSync("src/deep/er/leaf.txt", path.join(work, "leaf-link"))
    fs.writeFileSync(path.join(work, "empty"), "")
    fs.writeFileSync(path.join(work, "big.bin"), big)

    const commit = await ok(["commit", "--json"], at(alice, work))
    expect(json(commit).changes).toHaveLength(6)
    const push = await ok(["push", "--json"], at(alice, work))
    expect(json(push)).toMatchObject({ branch, pushed_commits: 1, created_repository: true })
    expect(json(push).uploaded_chunks).toBeGreaterThan(5) // the 12 MiB file travels as FastCDC chunks

    const noop = await ok(["push", "--json"], at(alice, work))
    expect(json(noop)).toMatchObject({ pushed_commits: 0 })

    // A clone of the branch: the same files, bytes, modes and link.
    const parent = tempDir("clones")
    const clone = await ok(["clone", "alice/atlas", "copy", "--branch", branch, "--json"], at(alice, parent))
    const copy = path.join(parent, "copy")
    expect(json(clone)).toMatchObject({ repository: "alice/atlas", branch, files: 6, key_stored: true })
    expect(listing(copy)).toEqual(listing(work))
    const config = JSON.parse(fs.readFileSync(path.join(copy, ".grove/config.json"), "utf8"))
    expect(config).toMatchObject({ remote: server.url, owner: "alice", name: "atlas", key: expect.stringMatching(/.+/) })
    expect(fs.statSync(path.join(copy, ".grove/config.json")).mode & 0o777).toBe(0o600)

    // The clone works with its stored key alone (no SERVICE_API_KEY).
    const keyOnly: GroveOptions = { home: tempDir("keyonly"), cwd: copy, env: { GROVE_REMOTE: server.url } }
    const clean = await ok(["status", "--json"], keyOnly)
    expect(json(clean)).toMatchObject({ branch, changes: [], unpushed: 0 })

    // Change in the clone, push; pull in the first checkout.
    fs.appendFileSync(path.join(copy, "README.md"), "More maps.\n")
    fs.rmSync(path.join(copy, "empty"))
    fs.writeFileSync(path.join(copy, "src/new.txt"), "new\n")
    const status = await ok(["status"], keyOnly)
    expect(status.stdout).toContain("M README.md")
    expect(status.stdout).toContain("D empty")
    expect(status.stdout).toContain("A src/new.txt")
    const diff = await ok(["diff"], keyOnly)
    expect(diff.stdout).toContain("--- a/README.md")
    expect(diff.stdout).toContain("+More maps.")
    await ok(["push"], keyOnly)

    const pulled = await ok(["pull", "--json"], at(alice, work))
    expect(json(pulled).events.join(" ")).toContain("fast-forwarded")
    expect(fs.readFileSync(path.join(work, "README.md"), "utf8")).toBe("# Atlas\n\nMaps.\nMore maps.\n")
    expect(fs.existsSync(path.join(work, "empty"))).toBe(false)
    expect(listing(work)).toEqual(listing(copy))

    const log = await ok(["log", "--json"], at(alice, work))
    expect(json(log).commits).toHaveLength(2)
    expect(json(log).commits.every((c: { author: string; pushed: boolean }) => c.author === "alice" && c.pushed)).toBe(true)
    const humanLog = await ok(["log"], at(alice, work))
    expect(humanLog.stdout).toMatch(/^commit [0-9a-f]{64}$/m)

    // desc and close, as the server reports them.
    await ok(["desc", "Maps of the world"], at(alice, work))
    let listed = await api("/alice/atlas/branches")
    expect(listed.status).toBe(200)
    expect(listed.body.branches.find((b: { name: string }) => b.name === branch)).toMatchObject({ description: "Maps of the world", status: "open" })
    await ok(["close"], at(alice, work))
    listed = await api("/alice/atlas/branches")
    expect(listed.body.branches.find((b: { name: string }) => b.name === branch)).toMatchObject({ status: "closed" })
  }, 120_000)

  it("a conflicting concurrent edit: the push is refused, pull writes markers and exits 5, commit and push finish it", async () => {
    const one = tempDir("one")
    const init = await ok(["init", "--name", "notes", "--json"], at(alice, one))
    const branch: string = json(init).branch
    fs.writeFileSync(path.join(one, "notes.txt"), "a\nb\nc\n")
    fs.writeFileSync(path.join(one, "other.txt"), "x\n")
    await ok(["push"], at(alice, one))
    const parent = tempDir("two")
    await ok(["clone", "alice/notes", "two", "--branch", branch], at(alice, parent))
    const two = path.join(parent, "two")

    fs.writeFileSync(path.join(two, "notes.txt"), "a\nB from two\nc\n")
    await ok(["push"], at(alice, two))
    fs.writeFileSync(path.join(one, "notes.txt"), "a\nB from one\nc\n")
    fs.writeFileSync(path.join(one, "other.txt"), "x\ny\n")

    const refused = await grove(["push", "--json"], at(alice, one))
    expect(refused.code).toBe(1)
    expect(json(refused)).toMatchObject({ code: "remote_head_changed" })
    expect(json(refused).error).toContain("run grove pull")

    const pulled = await grove(["pull", "--json"], at(alice, one))
    expect(pulled.code, pulled.stderr).toBe(5)
    expect(json(pulled)).toMatchObject({ code: "conflicts", conflict_paths: ["notes.txt"] })
    const text = fs.readFileSync(path.join(one, "notes.txt"), "utf8")
    expect(text).toMatch(/^<<<<<<< /m)
    expect(text).toContain("B from one")
    expect(text).toContain("B from two")
    expect(text).toMatch(/^>>>>>>> /m)
    expect(fs.readFileSync(path.join(one, "other.txt"), "utf8")).toBe("x\ny\n")

    const stillMarked = await grove(["commit", "--json"], at(alice, one))
    expect(stillMarked.code).toBe(1)
    expect(json(stillMarked)).toMatchObject({ code: "unresolved_conflicts" })

    fs.writeFileSync(path.join(one, "notes.txt"), "a\nB from both\nc\n")
    const merged = await ok(["commit", "--json"], at(alice, one))
    expect(json(merged).merge_parent).toMatch(/^[0-9a-f]{64}$/)
    await ok(["push"], at(alice, one))
    await ok(["pull"], at(alice, two))
    expect(fs.readFileSync(path.join(two, "notes.txt"), "utf8")).toBe("a\nB from both\nc\n")
    expect(fs.readFileSync(path.join(two, "other.txt"), "utf8")).toBe("x\ny\n")
  }, 120_000)

  it("pushing main is refused with a clear message", async () => {
    const dir = tempDir("mainpush")
    await ok(["init", "--name", "mainline"], at(alice, dir))
    const state = JSON.parse(fs.readFileSync(path.join(dir, ".grove/state.json"), "utf8"))
    const personal = state.branch
    state.branches.main = { ...state.branches[personal], name: "main", parent_branch: null }
    state.branch = "main"
    fs.writeFileSync(path.join(dir, ".grove/state.json"), JSON.stringify(state))
    fs.writeFileSync(path.join(dir, "f.txt"), "f\n")
    const refused = await grove(["push", "--json"], at(alice, dir))
    expect(refused.code).toBe(1)
    expect(json(refused).error).toMatch(/main changes only by merge/)
  })
})
