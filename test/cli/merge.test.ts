/**
 * Merges and reverts through the real `grove` binary against the real server
 * (embedded mode): a pushed branch lands on main (seen by the API and by a
 * clone of main) and the checkout moves to a new branch; a second checkout's
 * branch then conflicts (exit 5, the paths listed); `grove pull` merges main
 * in with markers, the user resolves and pushes, and the merge lands; merging
 * it again is refused (exit 1); a revert of the squash puts main's files back
 * and a revert whose files changed since conflicts (exit 5).
 *
 * Not covered here: the 412 CI gate (`grove merge` without --wait exits 1 naming
 * the CI state, --wait retries, --force overrides). CI run records are written by
 * CI, which comes in a later issue; an embedded server started by this suite has
 * no way to produce a running or failing CI record, so that path cannot be driven
 * end to end yet. The gate itself is tested on the server with records its test
 * writes.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import type { GroveServer } from "../support/GroveServer.ts"
import { at, grove, type GroveOptions, json, ok, startSuiteServer, stopSuiteServers, tempDir, userOf } from "./harness.ts"

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

/** main's head as the server reports it. */
const mainHead = async (repo: string): Promise<string | null> => {
  const answer = await api(`/alice/${repo}/pull?branch_name=main`)
  expect(answer.status).toBe(200)
  return answer.body.head
}

/** A fresh clone of main: its files (not .grove) as path -> text. */
const mainFiles = async (repo: string): Promise<Record<string, string>> => {
  const parent = tempDir("main")
  await ok(["clone", `alice/${repo}`, "copy"], at(alice, parent))
  const root = path.join(parent, "copy")
  const out: Record<string, string> = {}
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    const rel = path.relative(root, path.join(entry.parentPath, entry.name))
    if (entry.isFile() && !rel.startsWith(".grove")) out[rel] = fs.readFileSync(path.join(root, rel), "utf8")
  }
  return out
}

const read = (root: string, file: string) => fs.readFileSync(path.join(root, file), "utf8")
const branchOf = (root: string): string => JSON.parse(read(root, ".grove/state.json")).branch

describe("grove merge and grove revert", () => {
  it("merge, conflict, pull with markers, resolve, merge again, already merged, revert, revert conflict", async () => {
    // ---- 1. A pushed branch lands on main; the checkout moves to a new branch from the new main. ----
    const one = tempDir("one")
    const init = await ok(["init", "--name", "garden", "--json"], at(alice, one))
    const first: string = json(init).branch
    fs.writeFileSync(path.join(one, "shared.txt"), "a\nb\nc\n")
    fs.writeFileSync(path.join(one, "keep.txt"), "keep\n")
    await ok(["push"], at(alice, one))
    await ok(["desc", "Plant the garden"], at(alice, one))
    expect(await mainHead("garden")).toBeNull()

    const merged1 = await ok(["merge", "--json"], at(alice, one))
    const m1 = json(merged1)
    expect(m1).toMatchObject({ message: "Plant the garden", commit_hash: expect.stringMatching(/^[0-9a-f]{64}$/) })
    expect(m1.parent_hash).toBeUndefined()
    expect(await mainHead("garden")).toBe(m1.commit_hash)
    expect(await mainFiles("garden")).toEqual({ "shared.txt": "a\nb\nc\n", "keep.txt": "keep\n" })
    expect(merged1.stderr).toMatch(/Now on alice-[0-9a-f]{6}, a new branch from main/)
    const second = branchOf(one)
    expect(second).not.toBe(first)
    const status = await ok(["status", "--json"], at(alice, one))
    expect(json(status)).toMatchObject({ branch: second, parent_branch: "main", head: m1.commit_hash, changes: [], unpushed: 0 })
    const listed = await api("/alice/garden/branches")
    expect(listed.body.branches.find((b: { name: string }) => b.name === first).status).toMatch(/merged|closed/)

    // ---- 2. A second checkout starts from main; the first lands an edit of the same line first. ----
    const parent = tempDir("two")
    await ok(["clone", "alice/garden", "two"], at(alice, parent))
    const two = path.join(parent, "two")
    const twoBranch = branchOf(two)

    // Unpushed work is pushed by merge itself; the human output names the squash commit.
    fs.writeFileSync(path.join(one, "shared.txt"), "a\nB from one\nc\n")
    await ok(["desc", "One edits b"], at(alice, one))
    const merged2 = await ok(["merge"], at(alice, one))
    expect(merged2.stderr).toContain(`Pushed 1 commit(s) to ${second}.`)
    expect(merged2.stdout).toMatch(/^Merged alice-[0-9a-f]{6} into main: [0-9a-f]{12} "One edits b"$/m)
    const m2 = await mainHead("garden")
    expect(m2).not.toBe(m1.commit_hash)

    fs.writeFileSync(path.join(two, "shared.txt"), "a\nB from two\nc\n")
    fs.writeFileSync(path.join(two, "new.txt"), "new\n")
    await ok(["desc", "Two edits b"], at(alice, two))
    const conflict = await grove(["merge", "--json"], at(alice, two))
    expect(conflict.code, conflict.stderr).toBe(5)
    expect(json(conflict)).toMatchObject({ conflict_paths: ["shared.txt"], status: 409 })
    expect(json(conflict).error).toContain("Run grove pull to merge main into your branch")
    const conflictHuman = await grove(["merge"], at(alice, two))
    expect(conflictHuman.code).toBe(5)
    expect(conflictHuman.stderr).toMatch(/conflicts with main in 1 file\(s\):\n {2}shared\.txt\n/)
    expect(conflictHuman.stderr).toContain("grove pull")
    expect(await mainHead("garden")).toBe(m2) // nothing merged

    // ---- 3. grove pull merges main in with markers; resolve, push, merge lands. ----
    const pulled = await grove(["pull", "--json"], at(alice, two))
    expect(pulled.code, pulled.stderr).toBe(5)
    expect(json(pulled)).toMatchObject({ code: "conflicts", conflict_paths: ["shared.txt"] })
    const marked = read(two, "shared.txt")
    expect(marked).toMatch(/^<<<<<<< /m)
    expect(marked).toContain("B from one")
    expect(marked).toContain("B from two")
    expect(read(two, "new.txt")).toBe("new\n")

    fs.writeFileSync(path.join(two, "shared.txt"), "a\nB from both\nc\n")
    await ok(["push"], at(alice, two))
    const merged3 = await ok(["merge", "--json"], at(alice, two))
    const m3 = json(merged3)
    expect(m3).toMatchObject({ message: "Two edits b", parent_hash: m2 })
    expect(await mainHead("garden")).toBe(m3.commit_hash)
    expect(await mainFiles("garden")).toEqual({ "shared.txt": "a\nB from both\nc\n", "keep.txt": "keep\n", "new.txt": "new\n" })
    expect(branchOf(two)).not.toBe(twoBranch)

    // The first checkout's new branch has no commits of its own: pull moves it to the new main.
    const caughtUp = await ok(["pull", "--json"], at(alice, one))
    expect(json(caughtUp).events.join(" ")).toContain("main")
    expect(read(one, "shared.txt")).toBe("a\nB from both\nc\n")
    expect(read(one, "new.txt")).toBe("new\n")

    // ---- 4. Merging it again is refused with a message and the next command. ----
    const again = await grove(["merge", twoBranch, "--json"], at(alice, two))
    expect(again.code).toBe(1)
    expect(json(again).code).toMatch(/already_merged|branch_closed/)
    expect(json(again).error).toMatch(/already merged|closed/)
    expect(json(again).error).toContain("grove switch -c")

    // ---- 5. A revert of the last squash puts main's files back. ----
    const reverted = await ok(["revert", m3.commit_hash, "--json"], at(alice, two))
    expect(json(reverted)).toMatchObject({ branch: "main", reverted_hash: m3.commit_hash, parent_hash: m3.commit_hash })
    expect(reverted.stderr).toContain("run grove pull")
    expect(await mainHead("garden")).toBe(json(reverted).commit_hash)
    expect(await mainFiles("garden")).toEqual({ "shared.txt": "a\nB from one\nc\n", "keep.txt": "keep\n" })
    await ok(["pull"], at(alice, two))
    expect(read(two, "shared.txt")).toBe("a\nB from one\nc\n")
    expect(fs.existsSync(path.join(two, "new.txt"))).toBe(false)

    // ---- 6. Reverting the first squash conflicts: shared.txt changed since. ----
    const refused = await grove(["revert", m1.commit_hash, "--json"], at(alice, two))
    expect(refused.code, refused.stderr).toBe(5)
    expect(json(refused)).toMatchObject({ status: 409 })
    expect(json(refused).conflict_paths).toContain("shared.txt")
    const refusedHuman = await grove(["revert", m1.commit_hash], at(alice, two))
    expect(refusedHuman.code).toBe(5)
    expect(refusedHuman.stderr).toMatch(/changed since:\n {2}/)
    expect(await mainFiles("garden")).toEqual({ "shared.txt": "a\nB from one\nc\n", "keep.txt": "keep\n" })
  }, 240_000)

  it("pull merges a moved main in cleanly; a revert on the current branch is pulled into the checkout", async () => {
    const one = tempDir("meadow-one")
    await ok(["init", "--name", "meadow"], at(alice, one))
    fs.writeFileSync(path.join(one, "f.txt"), "f1\n")
    await ok(["merge"], at(alice, one))
    const parent = tempDir("meadow-two")
    await ok(["clone", "alice/meadow", "two"], at(alice, parent))
    const two = path.join(parent, "two")
    const twoBranch = branchOf(two)

    fs.writeFileSync(path.join(two, "g.txt"), "g\n")
    await ok(["push"], at(alice, two))
    fs.writeFileSync(path.join(one, "f.txt"), "f2\n")
    await ok(["merge"], at(alice, one))

    // main moved under a branch with pushed commits: pull merges it in (a merge commit, not pushed yet).
    const pulled = await ok(["pull", "--json"], at(alice, two))
    expect(json(pulled)).toMatchObject({ branch: twoBranch, unpushed: 1 })
    expect(json(pulled).events).toContain(`merged main into ${twoBranch}`)
    expect(read(two, "f.txt")).toBe("f2\n")
    expect(read(two, "g.txt")).toBe("g\n")
    const log = await ok(["log", "--json", "-n", "1"], at(alice, two))
    expect(json(log).commits[0].merge_parent).toBe(await mainHead("meadow"))

    // A commit on this branch, reverted: the checkout pulls the revert.
    await ok(["push"], at(alice, two))
    fs.writeFileSync(path.join(two, "g.txt"), "g changed\n")
    const pushed = await ok(["push", "--json"], at(alice, two))
    const reverted = await ok(["revert", json(pushed).head, "--json"], at(alice, two))
    expect(json(reverted)).toMatchObject({ branch: twoBranch, reverted_hash: json(pushed).head })
    expect(reverted.stderr).toContain("fast-forwarded")
    expect(read(two, "g.txt")).toBe("g\n")
    expect(json(await ok(["status", "--json"], at(alice, two)))).toMatchObject({ head: json(reverted).commit_hash, changes: [], unpushed: 0 })

    await ok(["merge"], at(alice, two))
    expect(await mainFiles("meadow")).toEqual({ "f.txt": "f2\n", "g.txt": "g\n" })
  }, 120_000)

  it("merge refuses main and reports a branch the server does not have", async () => {
    const dir = tempDir("refuse")
    await ok(["init", "--name", "plot"], at(alice, dir))
    fs.writeFileSync(path.join(dir, "f.txt"), "f\n")
    await ok(["push"], at(alice, dir))
    const main = await grove(["merge", "main", "--json"], at(alice, dir))
    expect(main.code).toBe(2)
    expect(json(main).code).toBe("usage")
    const missing = await grove(["merge", "nobody-000000", "--json"], at(alice, dir))
    expect(missing.code).toBe(1)
    expect(json(missing)).toMatchObject({ status: 404 })
  }, 60_000)
})
