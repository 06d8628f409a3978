/**
 * Merge, sync and revert against the real server, one test per row of the spec's merge-response
 * table and per sync and revert rule (the CI gate's 412 needs CI records: test/cluster/content.test.ts
 * writes them into PostgreSQL; the compare-and-set answers main_moved / branch_moved are tested on the
 * entity commands directly in packages/server/src/content/Landing.test.ts and under load in test/stress).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, type Built, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
let token: string

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("mia")
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const a = () => api(server.url, token)
/** main of repository m1 after the first test's two merges. */
let m1Main: MainState = { head: null, snapshot: new Map() }
const enc = encodeURIComponent

/** Main's head commit and its files, as built by earlier merges of this test (tracked locally). */
interface MainState {
  head: string | null
  snapshot: Built["snapshot"]
}

const push = async (repo: string, branch: string, commits: ReadonlyArray<Built>, description?: string) => {
  const reply = await a().post(`/mia/${repo}/push`, pushBody({ branch, commits, ...(description === undefined ? {} : { description }) }))
  expect(reply.body, JSON.stringify(reply.body)).toMatchObject({ success: true })
}

const branchOff = (main: MainState, branch: string, files: Record<string, string | { content: string; mode: "executable" | "regular" }>) =>
  buildCommit({ branch, files, parentHash: main.head, parentSnapshot: main.snapshot })

const merge = (repo: string, branch: string, query = "") => a().post(`/mia/${repo}/branches/${enc(branch)}/merge${query}`)

describe("merge responses", () => {
  it("200: one squash commit on main with the description as message and the tip as merge parent; the branch ends merged", async () => {
    await a().post("/repos", { name: "m1" })
    const main: MainState = { head: null, snapshot: new Map() }
    const c1 = branchOff(main, "one", { "a.txt": "a\n", "b.txt": "b\n" })
    const c2 = buildCommit({ branch: "one", parent: c1, files: { "a.txt": "a2\n", "b.txt": "b\n" } })
    await push("m1", "one", [c1, c2], "Add a and b")
    const merged = await merge("m1", "one")
    expect(merged.status).toBe(200)
    expect(merged.body).toMatchObject({ message: "Add a and b", merge_parent_hash: c2.commit.hash })
    expect(merged.body.parent_hash).toBeUndefined()
    expect(merged.body.commit_hash).toMatch(/^[0-9a-f]{64}$/)
    expect((await a().get("/mia/m1")).body.head).toBe(merged.body.commit_hash)
    // The record this node kept as the merge landed (no read) is the stored row: the listing reads it from the database.
    const listed = (await a().get("/repos?sort=name")).body.repos.find((r: { name: string }) => r.name === "m1")
    expect((await a().get("/mia/m1")).body).toEqual(listed)
    expect(merged.body.repository).toBeUndefined()
    expect((await a().get("/mia/m1/branches/one")).body).toMatchObject({ status: "closed", state: "merged" })

    const info = await a().post("/mia/m1/commits/info", { hashes: [merged.body.commit_hash] })
    expect(info.body.commits[0]).toMatchObject({
      branch_name: "main",
      parent_hash: null,
      merge_parent_hash: c2.commit.hash,
      message: "Add a and b",
      manifest_hash: c2.commit.manifest_hash,
      author: "mia"
    })
    // A second branch lands on top: parent is the previous squash.
    const afterFirst: MainState = { head: merged.body.commit_hash, snapshot: c2.snapshot }
    const d = branchOff(afterFirst, "two", { "a.txt": "a2\n", "b.txt": "b\n", "c.txt": "c\n" })
    await push("m1", "two", [d], "Add c")
    const second = await merge("m1", "two")
    expect(second.body).toMatchObject({ parent_hash: merged.body.commit_hash, merge_parent_hash: d.commit.hash, message: "Add c" })
    m1Main = { head: second.body.commit_hash, snapshot: d.snapshot }
    const chain = await a().get("/mia/m1/pull")
    expect(chain.body.commits.map((c: { message: string }) => c.message)).toEqual(["Add a and b", "Add c"])
  })

  it("400: a branch already merged or closed", async () => {
    const again = await merge("m1", "one")
    expect(again.status).toBe(400)
    expect(again.body.code).toBe("already_merged")
    await push("m1", "shut", [branchOff(m1Main, "shut", { "a.txt": "a2\n", "b.txt": "b\n", "c.txt": "c\n", "z.txt": "z" })])
    await a().post("/mia/m1/branches/shut/close")
    const closed = await merge("m1", "shut")
    expect(closed.status).toBe(400)
    expect(closed.body.error).toMatch(/already closed/)
    expect((await merge("m1", "nope")).status).toBe(404)
  })

  it("409 with conflict_paths: every conflicting path, add/add, modify/delete and mode conflicts included", async () => {
    await a().post("/repos", { name: "m2" })
    const empty: MainState = { head: null, snapshot: new Map() }
    const base = branchOff(empty, "base", { "edit.txt": "base\n", "gone.txt": "gone\n", "mode.sh": "echo\n", "same.txt": "same\n" })
    await push("m2", "base", [base], "Base")
    const landed = await merge("m2", "base")
    const main: MainState = { head: landed.body.commit_hash, snapshot: base.snapshot }
    // Main moves on.
    const mainSide = branchOff(main, "main-side", {
      "edit.txt": "main edit\n",
      "gone.txt": "main keeps and edits\n",
      "mode.sh": { content: "echo\n", mode: "executable" },
      "same.txt": "same\n",
      "added.txt": "main's version\n"
    })
    await push("m2", "main-side", [mainSide], "Main side")
    expect((await merge("m2", "main-side")).status).toBe(200)
    // The branch, made from the old main, changes the same things differently.
    const theirs = branchOff(main, "theirs", {
      "edit.txt": "branch edit\n",
      "mode.sh": { content: "echo\n", mode: "regular" },
      "same.txt": "same\n",
      "added.txt": "branch's version\n",
      "other.txt": "fine\n"
    })
    // mode.sh: main made it executable, the branch then edits its content: the identity (content, mode) changed on both sides.
    const theirs2 = buildCommit({ branch: "theirs", parent: theirs, files: {
      "edit.txt": "branch edit\n",
      "mode.sh": { content: "echo changed\n", mode: "regular" },
      "same.txt": "same\n",
      "added.txt": "branch's version\n",
      "other.txt": "fine\n"
    } })
    await push("m2", "theirs", [theirs, theirs2], "Theirs")
    const conflict = await merge("m2", "theirs")
    expect(conflict.status).toBe(409)
    expect(conflict.body.conflict_paths).toEqual(["added.txt", "edit.txt", "gone.txt", "mode.sh"])
    expect(conflict.body.error).toMatch(/conflicts with main/)
    // Nothing changed: main and the branch are where they were.
    expect((await a().get("/mia/m2/branches/theirs")).body).toMatchObject({ status: "open", head: theirs2.commit.hash })
  })
})

describe("sync", () => {
  it("merges the parent into the branch as a commit whose merge parent is main's head", async () => {
    await a().post("/repos", { name: "s1" })
    const empty: MainState = { head: null, snapshot: new Map() }
    const base = branchOff(empty, "base", { "shared.txt": "1\n" })
    await push("s1", "base", [base], "Base")
    const m1 = await merge("s1", "base")
    const main: MainState = { head: m1.body.commit_hash, snapshot: base.snapshot }
    const feature = branchOff(main, "feature", { "shared.txt": "1\n", "feature.txt": "f\n" })
    await push("s1", "feature", [feature])
    expect((await a().post("/mia/s1/branches/feature/sync")).body).toEqual({ branch: "feature", synced: false, head: feature.commit.hash })
    const other = branchOff(main, "other", { "shared.txt": "1\n", "other.txt": "o\n" })
    await push("s1", "other", [other], "Other")
    const m2 = await merge("s1", "other")
    const synced = await a().post("/mia/s1/branches/feature/sync")
    expect(synced.status, JSON.stringify(synced.body)).toBe(200)
    expect(synced.body).toMatchObject({ branch: "feature", synced: true, merge_parent_hash: m2.body.commit_hash })
    const branch = (await a().get("/mia/s1/branches/feature")).body
    expect(branch.head).toBe(synced.body.commit_hash)
    const tree = await a().get(`/mia/s1/tree/${synced.body.commit_hash}`)
    expect(tree.body.entries.map((e: { name: string }) => e.name)).toEqual(["feature.txt", "other.txt", "shared.txt"])
    const info = (await a().post("/mia/s1/commits/info", { hashes: [synced.body.commit_hash] })).body.commits[0]
    expect(info).toMatchObject({ branch_name: "feature", parent_hash: feature.commit.hash, merge_parent_hash: m2.body.commit_hash })
    // The branch can now merge cleanly.
    expect((await merge("s1", "feature")).status).toBe(200)
  })

  it("409 with conflict_paths when the parent changed the same files", async () => {
    await a().post("/repos", { name: "s2" })
    const empty: MainState = { head: null, snapshot: new Map() }
    const base = branchOff(empty, "base", { "x.txt": "base\n" })
    await push("s2", "base", [base], "Base")
    const main: MainState = { head: (await merge("s2", "base")).body.commit_hash, snapshot: base.snapshot }
    const mine = branchOff(main, "mine", { "x.txt": "mine\n" })
    await push("s2", "mine", [mine])
    const theirs = branchOff(main, "theirs", { "x.txt": "theirs\n" })
    await push("s2", "theirs", [theirs], "Theirs")
    await merge("s2", "theirs")
    const sync = await a().post("/mia/s2/branches/mine/sync")
    expect(sync.status).toBe(409)
    expect(sync.body.conflict_paths).toEqual(["x.txt"])
    expect((await a().get("/mia/s2/branches/mine")).body.head).toBe(mine.commit.hash)
  })
})

describe("revert", () => {
  it("undoes a squash on main, and refuses (409) when the files it touched changed since", async () => {
    await a().post("/repos", { name: "r1" })
    const empty: MainState = { head: null, snapshot: new Map() }
    const base = branchOff(empty, "base", { "keep.txt": "keep\n", "x.txt": "x1\n" })
    await push("r1", "base", [base], "Base")
    const m1 = await merge("r1", "base")
    const main: MainState = { head: m1.body.commit_hash, snapshot: base.snapshot }
    const change = branchOff(main, "change", { "keep.txt": "keep\n", "x.txt": "x2\n", "new.txt": "new\n" })
    await push("r1", "change", [change], "Change x")
    const m2 = await merge("r1", "change")

    const reverted = await a().post(`/mia/r1/commits/${m2.body.commit_hash}/revert`)
    expect(reverted.status, JSON.stringify(reverted.body)).toBe(200)
    expect(reverted.body).toMatchObject({ branch: "main", parent_hash: m2.body.commit_hash, reverted_hash: m2.body.commit_hash })
    expect(reverted.body.message).toMatch(/^Revert "Change x"/)
    expect((await a().get("/mia/r1")).body.head).toBe(reverted.body.commit_hash)
    const tree = await a().get(`/mia/r1/tree/${reverted.body.commit_hash}`)
    expect(tree.body.entries.map((e: { name: string }) => e.name)).toEqual(["keep.txt", "x.txt"])
    const raw = await fetch(`${server.url}/api/mia/r1/raw/${reverted.body.commit_hash}/x.txt`, { headers: { authorization: `Bearer ${token}` } })
    expect(await raw.text()).toBe("x1\n")

    // Reverting the first squash now: x.txt is back at x1 (what m1 wrote), keep.txt unchanged: allowed.
    // But revert m2 again: its files changed since (the revert changed them back): 409 with the paths.
    const twice = await a().post(`/mia/r1/commits/${m2.body.commit_hash}/revert`)
    expect(twice.status).toBe(409)
    expect(twice.body.code).toBe("revert_conflict")
    expect(twice.body.conflict_paths).toEqual(["new.txt", "x.txt"])
    expect((await a().post(`/mia/r1/commits/${"f".repeat(64)}/revert`)).status).toBe(404)
    expect((await a().post("/mia/r1/commits/nothex/revert")).status).toBe(400)
  })

  it("reverts a commit on a branch", async () => {
    await a().post("/repos", { name: "r2" })
    const c1 = buildCommit({ branch: "work", files: { "a.txt": "1\n" } })
    const c2 = buildCommit({ branch: "work", parent: c1, files: { "a.txt": "1\n", "b.txt": "2\n" } })
    const c3 = buildCommit({ branch: "work", parent: c2, files: { "a.txt": "3\n", "b.txt": "2\n" } })
    await push("r2", "work", [c1, c2, c3])
    const reverted = await a().post(`/mia/r2/commits/${c2.commit.hash}/revert`)
    expect(reverted.status, JSON.stringify(reverted.body)).toBe(200)
    expect(reverted.body.branch).toBe("work")
    const tree = await a().get(`/mia/r2/tree/${reverted.body.commit_hash}`)
    expect(tree.body.entries.map((e: { name: string }) => e.name)).toEqual(["a.txt"])
    expect((await a().get("/mia/r2/branches/work")).body.head).toBe(reverted.body.commit_hash)
  })
})
