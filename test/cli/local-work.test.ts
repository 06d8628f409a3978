/**
 * The client never loses local work (issue 22, item 1), through the real `grove` binary against a
 * real server. Each case first puts work in place (an edited file, a new file, a deleted file, an
 * unpushed commit), runs a command that rewrites the working tree or the checkout's state, and
 * checks that the work survives, or that the command refused (saying what would be lost and how to
 * keep it) and that `--discard` then drops it. Commands: switch -c / switch NAME / switch main,
 * push on main, pull (on a branch and on main), revert, clone into an existing folder, and a push
 * resumed after it was killed.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
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

const SEED = { "README.md": "# Seed\n", "keep.txt": "keep\n", "gone.txt": "gone\n" }

const read = (root: string, file: string) => fs.readFileSync(path.join(root, file), "utf8")
const write = (root: string, file: string, text: string) => fs.writeFileSync(path.join(root, file), text)
const has = (root: string, file: string) => fs.existsSync(path.join(root, file))

/** Lands a commit on main through a branch of a seeding checkout (returned, on a new branch after the merge). */
const landOnMain = async (seed: string, files: Record<string, string>, description: string) => {
  for (const [file, text] of Object.entries(files)) write(seed, file, text)
  await ok(["desc", description], at(alice, seed))
  await ok(["merge"], at(alice, seed))
}

/** A repository whose main holds SEED; answers the seeding checkout. */
const seedRepo = async (name: string) => {
  const seed = tempDir("seed")
  await ok(["init", "--name", name], at(alice, seed))
  await landOnMain(seed, SEED, "Seed")
  return seed
}

/** A fresh clone of the repository (on a personal branch from main). */
const cloneOf = async (name: string): Promise<string> => {
  const parent = tempDir("clone")
  await ok(["clone", `alice/${name}`, "copy"], at(alice, parent))
  return path.join(parent, "copy")
}

/** The three kinds of uncommitted work: an edit, a new file, a deletion. */
const editTree = (root: string) => {
  fs.appendFileSync(path.join(root, "README.md"), "X\n")
  write(root, "new.txt", "new\n")
  fs.rmSync(path.join(root, "gone.txt"))
}

const expectEdited = (root: string) => {
  expect(read(root, "README.md")).toBe("# Seed\nX\n")
  expect(read(root, "new.txt")).toBe("new\n")
  expect(has(root, "gone.txt")).toBe(false)
}

/** The branch as the server has it equals the checkout's files. */
const expectPublished = async (root: string, name: string, branch: string) => {
  const parent = tempDir("verify")
  await ok(["clone", `alice/${name}`, "copy", "--branch", branch], at(alice, parent))
  expect(listing(path.join(parent, "copy"))).toEqual(listing(root))
}

const status = async (root: string) => json(await ok(["status", "--json"], at(alice, root)))
const paths = (s: { changes: ReadonlyArray<{ path: string }> }) => s.changes.map((c) => c.path).sort()

/** A checkout of a new repository whose push of `a.txt` was killed once the server took it. */
const killedPush = async (name: string) => {
  await seedRepo(name)
  const work = await cloneOf(name)
  const branch: string = (await status(work)).branch
  write(work, "a.txt", "a\n")
  const killed = await grove(["push"], { ...alice, cwd: work, env: { ...alice.env!, GROVE_TEST_CRASH_AT: "push:sent" } })
  expect(killed.code).not.toBe(0)
  return { work, branch }
}

describe("local work survives every command that rewrites the checkout", () => {
  it("edits on main: push says to switch -c, and switch -c takes the edits along (the reported loss)", async () => {
    await seedRepo("lw-switch-c")
    const work = await cloneOf("lw-switch-c")
    await ok(["switch", "main"], at(alice, work))
    editTree(work)

    const refused = await grove(["push", "--json"], at(alice, work))
    expect(refused.code).toBe(1)
    expect(json(refused).error).toContain("grove switch -c")
    expectEdited(work)

    const switched = await ok(["switch", "-c", "topic", "--json"], at(alice, work))
    expect(json(switched)).toMatchObject({ branch: "topic", previous: "main" })
    expectEdited(work)
    expect(await status(work)).toMatchObject({ branch: "topic", parent_branch: "main", unpushed: 0 })
    expect(paths(await status(work))).toEqual(["README.md", "gone.txt", "new.txt"])

    expect(json(await ok(["push", "--json"], at(alice, work)))).toMatchObject({ branch: "topic", pushed_commits: 1 })
    await expectPublished(work, "lw-switch-c", "topic")
    // main itself is as the server has it.
    await ok(["switch", "main"], at(alice, work))
    expect(await status(work)).toMatchObject({ branch: "main", unpushed: 0, changes: [] })
    expect(listing(work)).toEqual(listing(await cloneOf("lw-switch-c")))
  })

  it("a commit on main (1 unpushed) and later edits move to a new personal branch with switch -c", async () => {
    await seedRepo("lw-commit-main")
    const work = await cloneOf("lw-commit-main")
    await ok(["switch", "main"], at(alice, work))
    editTree(work)
    expect(json(await ok(["commit", "--json"], at(alice, work)))).toMatchObject({ branch: "main", unpushed: 1 })
    write(work, "later.txt", "later\n")

    const branch: string = json(await ok(["switch", "-c", "--json"], at(alice, work))).branch
    expect(branch).toMatch(/^alice-[0-9a-f]{6}$/)
    expectEdited(work)
    expect(read(work, "later.txt")).toBe("later\n")
    const moved = await status(work)
    expect(moved).toMatchObject({ branch, unpushed: 1 })
    expect(paths(moved)).toEqual(["later.txt"])
    const log = json(await ok(["log", "--json"], at(alice, work)))
    expect(log.commits[0]).toMatchObject({ branch, pushed: false })

    expect(json(await ok(["push", "--json"], at(alice, work)))).toMatchObject({ branch, pushed_commits: 2 })
    await expectPublished(work, "lw-commit-main", branch)
  })

  it("leaving main for an existing branch refuses (what, and how to keep it); --discard drops it", async () => {
    await seedRepo("lw-refuse")
    const work = await cloneOf("lw-refuse")
    const personal: string = (await status(work)).branch
    await ok(["switch", "main"], at(alice, work))
    fs.appendFileSync(path.join(work, "README.md"), "X\n")
    await ok(["commit"], at(alice, work))
    write(work, "extra.txt", "extra\n")

    const refused = await grove(["switch", personal, "--json"], at(alice, work))
    expect(refused.code).toBe(1)
    expect(json(refused)).toMatchObject({ code: "local_work", branch: "main", unpushed: 1, changed_paths: ["extra.txt"] })
    const human = await grove(["switch", personal], at(alice, work))
    expect(human.code).toBe(1)
    expect(human.stderr).toContain("1 changed file(s) and 1 unpushed commit(s)")
    expect(human.stderr).toContain("A extra.txt")
    expect(human.stderr).toContain("grove switch -c NAME")
    expect(human.stderr).toContain(`grove switch ${personal} --discard`)
    expect(read(work, "README.md")).toBe("# Seed\nX\n")
    expect(read(work, "extra.txt")).toBe("extra\n")
    expect(await status(work)).toMatchObject({ branch: "main", unpushed: 1 })

    await ok(["switch", personal, "--discard"], at(alice, work))
    expect(read(work, "README.md")).toBe("# Seed\n")
    expect(has(work, "extra.txt")).toBe(false)
    await ok(["switch", "main"], at(alice, work))
    expect(await status(work)).toMatchObject({ branch: "main", unpushed: 0, changes: [] })
    expect(read(work, "README.md")).toBe("# Seed\n")
  })

  it("a branch's work (a commit and uncommitted edits) is there again after switch main and back", async () => {
    await seedRepo("lw-branch")
    const work = await cloneOf("lw-branch")
    const personal: string = (await status(work)).branch
    editTree(work)
    await ok(["commit"], at(alice, work))
    write(work, "keep.txt", "keep, edited\n")
    const before = listing(work)

    await ok(["switch", "main"], at(alice, work))
    expect(read(work, "README.md")).toBe("# Seed\n")
    await ok(["switch", personal], at(alice, work))
    expect(listing(work)).toEqual(before)
    expect(await status(work)).toMatchObject({ branch: personal, unpushed: 2, changes: [] })
  })

  it("pull on a branch and on main, with main moved on the server, keeps the work", async () => {
    const seed = await seedRepo("lw-pull")
    const work = await cloneOf("lw-pull")
    const personal: string = (await status(work)).branch
    editTree(work)
    await ok(["commit"], at(alice, work))
    write(work, "keep.txt", "keep, edited\n")
    await landOnMain(seed, { "other.txt": "other\n" }, "Other")

    await ok(["pull"], at(alice, work))
    expectEdited(work)
    expect(read(work, "keep.txt")).toBe("keep, edited\n")
    expect(read(work, "other.txt")).toBe("other\n")
    expect(await status(work)).toMatchObject({ branch: personal, changes: [] })

    // On main: the pull merges the server's main into the local work; switch -c then takes it along.
    const onMain = await cloneOf("lw-pull")
    await ok(["switch", "main"], at(alice, onMain))
    editTree(onMain)
    await landOnMain(seed, { "third.txt": "third\n" }, "Third")
    await ok(["pull"], at(alice, onMain))
    expectEdited(onMain)
    expect(read(onMain, "third.txt")).toBe("third\n")
    await ok(["switch", "-c", "from-main"], at(alice, onMain))
    expectEdited(onMain)
    await ok(["push"], at(alice, onMain))
    await expectPublished(onMain, "lw-pull", "from-main")
  })

  it("revert on the current branch keeps uncommitted edits and new files", async () => {
    await seedRepo("lw-revert")
    const work = await cloneOf("lw-revert")
    write(work, "f.txt", "f\n")
    const pushed = json(await ok(["push", "--json"], at(alice, work))).head as string
    fs.appendFileSync(path.join(work, "README.md"), "X\n")
    write(work, "new.txt", "new\n")

    await ok(["revert", pushed], at(alice, work))
    expect(has(work, "f.txt")).toBe(false)
    expect(read(work, "README.md")).toBe("# Seed\nX\n")
    expect(read(work, "new.txt")).toBe("new\n")
  })

  it("clone refuses a folder holding the user's files and leaves them; a failed clone keeps a folder it was given", async () => {
    await seedRepo("lw-clone")
    const mine = tempDir("mine")
    write(mine, "mine.txt", "mine\n")
    write(mine, ".env", "SECRET=1\n")
    const refused = await grove(["clone", "alice/lw-clone", mine, "--json"], alice)
    expect(refused.code).toBe(1)
    expect(json(refused)).toMatchObject({ code: "destination_exists" })
    expect(fs.readdirSync(mine).sort()).toEqual([".env", "mine.txt"])

    const hidden = tempDir("hidden")
    write(hidden, ".env", "SECRET=1\n")
    expect((await grove(["clone", "alice/lw-clone", hidden], alice)).code).toBe(1)
    expect(read(hidden, ".env")).toBe("SECRET=1\n")

    const file = path.join(tempDir("file"), "notes")
    fs.writeFileSync(file, "notes\n")
    const onFile = await grove(["clone", "alice/lw-clone", file, "--json"], alice)
    expect(onFile.code).toBe(1)
    expect(json(onFile)).toMatchObject({ code: "destination_exists" })
    expect(fs.readFileSync(file, "utf8")).toBe("notes\n")

    const empty = tempDir("empty")
    const failed = await grove(["clone", "alice/lw-clone", empty, "--branch", "no-such-branch", "--json"], alice)
    expect(failed.code).toBe(1)
    expect(json(failed)).toMatchObject({ code: "no_such_branch" })
    expect(fs.readdirSync(empty)).toEqual([])
  })

  it("work made after a push was killed once the server took it survives the resumed push", async () => {
    const name = "lw-interrupt"
    const { work, branch } = await killedPush(name)
    fs.appendFileSync(path.join(work, "a.txt"), "more\n")
    editTree(work)
    await ok(["commit"], at(alice, work))
    write(work, "b.txt", "b\n")

    await ok(["push"], at(alice, work))
    expect(read(work, "a.txt")).toBe("a\nmore\n")
    expectEdited(work)
    expect(await status(work)).toMatchObject({ branch, unpushed: 0, changes: [] })
    await expectPublished(work, name, branch)
  })
})

describe("a push killed once the server took it, then a pull before the next push", () => {
  it("the pull records the landed push; the work made since is pushed, nothing twice", async () => {
    const name = "lw-interrupt-pull"
    const { work, branch } = await killedPush(name)
    editTree(work)

    await ok(["pull"], at(alice, work))
    expectEdited(work)
    expect(read(work, "a.txt")).toBe("a\n")
    expect(await status(work)).toMatchObject({ branch, unpushed: 1, changes: [] })
    expect(json(await ok(["push", "--json"], at(alice, work)))).toMatchObject({ pushed_commits: 1 })
    expect(await status(work)).toMatchObject({ branch, unpushed: 0, changes: [] })
    await expectPublished(work, name, branch)
  })
})
