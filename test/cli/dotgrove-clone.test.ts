/**
 * A repository an older server took with a `.grove` below the root (`d/.grove/x.txt`: the Oak client or the raw API
 * could push one; servers refuse it now, test/server/sync.test.ts). The walk skips a `.grove` folder at any depth,
 * so a checkout holding one showed its files as deleted and a push deleted them: `clone` and `pull` refuse to write
 * it (reserved_path) and leave nothing. The test stops the server and plants the commits in its embedded database
 * as a push would have stored them (as test/server/merge-dotgrove.test.ts does), then starts it again.
 */
import { PGlite } from "@electric-sql/pglite"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { buildCommit, type Built, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { serializeIndex } from "../../packages/cli/src/local/IndexFile.ts"
import { plantCommit } from "../support/planted.ts"
import { at, grove, type GroveOptions, json, ok, removeTempDirs, tempDir, userOf } from "./harness.ts"

let server: GroveServer
let alice: GroveOptions
/** A clone of branch `one` made before its head moved to a commit adding `d/.grove/x.txt`. */
let work: string
let first: Built
/** Branch `one`'s head on the server: `first` plus `d/.grove/x.txt`. */
let nested: Built

beforeAll(async () => {
  const dataDir = tempDir("dotgrove-data")
  server = await startServer({ dataDir })
  alice = userOf(server, "alice", await server.createUser("alice"))
  const as = api(server.url, alice.env!["SERVICE_API_KEY"])
  expect((await as.post("/repos", { name: "legacy" })).status).toBe(201)
  first = buildCommit({ branch: "one", files: { "a.txt": "a\n", "x.txt": "x\n" } })
  expect((await as.post("/alice/legacy/push", pushBody({ branch: "one", commits: [first], description: "one" }))).body).toMatchObject({ success: true })
  const parent = tempDir("dotgrove-work")
  await ok(["clone", "alice/legacy", "work", "--branch", "one"], at(alice, parent))
  work = path.join(parent, "work")

  await server.stop()
  nested = buildCommit({ branch: "one", files: { "a.txt": "a\n", "x.txt": "x\n", "d/.grove/x.txt": "x\n" }, parent: first })
  const deep = buildCommit({ branch: "deep", files: { "a.txt": "a\n", "D/.GROVE/x.txt": "x\n" }, parent: first })
  const db = await PGlite.create(path.join(dataDir, "db"))
  const repoId = await plantCommit(db, "legacy", nested)
  await plantCommit(db, "legacy", deep)
  await db.query(`UPDATE branches SET head = $2 WHERE repo_id = $1 AND name = 'one'`, [repoId, nested.commit.hash])
  await db.query(
    `INSERT INTO branches (repo_id, name, description, parent_branch, head, created_by, created_at) VALUES ($1, 'deep', 'deep', NULL, $2, 'alice', '2026-11-22T10:00:00+00:00')`,
    [repoId, deep.commit.hash]
  )
  await db.close()
  server = await startServer({ dataDir })
  alice = { ...alice, env: { ...alice.env!, GROVE_REMOTE: server.url } }
  // The clone's checkout names the server it came from: the same data on another port now.
  const config = path.join(work, ".grove/config.json")
  fs.writeFileSync(config, JSON.stringify({ ...JSON.parse(fs.readFileSync(config, "utf8")), remote: server.url }))
}, 300_000)

afterAll(async () => {
  await server?.stop()
  removeTempDirs()
})

describe("a .grove below the root, held by an older server", () => {
  it("clone refuses it, naming where, and leaves no folder", async () => {
    const parent = tempDir("dotgrove-clone")
    const cloned = await grove(["clone", "alice/legacy", "dest", "--branch", "deep", "--json"], at(alice, parent))
    expect(cloned.code, cloned.stdout + cloned.stderr).not.toBe(0)
    expect(json(cloned)).toMatchObject({ code: "reserved_path" })
    expect(json(cloned).error).toContain("'D/.GROVE/'")
    expect(fs.readdirSync(parent)).toEqual([])
  }, 120_000)

  it("pull refuses it and leaves the working tree and the branch's head as they were", async () => {
    const before = fs.readFileSync(path.join(work, ".grove/state.json"), "utf8")
    const pulled = await grove(["pull", "--json"], at(alice, work))
    expect(pulled.code, pulled.stdout + pulled.stderr).not.toBe(0)
    expect(json(pulled)).toMatchObject({ code: "reserved_path" })
    expect(json(pulled).error).toContain("'d/.grove/'")
    expect(fs.readdirSync(work).sort()).toEqual([".grove", "a.txt", "x.txt"])
    expect(JSON.parse(fs.readFileSync(path.join(work, ".grove/state.json"), "utf8")).branches.one.head)
      .toBe(JSON.parse(before).branches.one.head)
    expect(json(await ok(["status", "--json"], at(alice, work)))).toMatchObject({ changes: [], invalid_paths: [] })
  }, 120_000)

  it("a checkout an older client made at such a head: status lists the file as reserved, push refuses it, removed it lands", async () => {
    // The refused pull stored the head's commit and trees; the files and the index are made as the older client left them.
    await grove(["pull", "--json"], at(alice, work))
    fs.mkdirSync(path.join(work, "d/.grove"), { recursive: true })
    fs.writeFileSync(path.join(work, "d/.grove/x.txt"), "x\n")
    const files = new Map([...nested.snapshot].map(([file, { hash, mode }]) => {
      const s = fs.lstatSync(path.join(work, file))
      return [file, { hash, mode, size: s.size, mtimeMs: s.mtimeMs, ino: s.ino, ctimeMs: s.ctimeMs }] as const
    }))
    await new Promise((resolve) => setTimeout(resolve, 20))
    fs.writeFileSync(path.join(work, ".grove/index.json"), serializeIndex(files, nested.commit.hash, new Map(), Date.now()))
    const stateFile = path.join(work, ".grove/state.json")
    const state = JSON.parse(fs.readFileSync(stateFile, "utf8"))
    state.branches.one = { ...state.branches.one, head: nested.commit.hash, remote_head: nested.commit.hash, unpushed: [] }
    fs.writeFileSync(stateFile, JSON.stringify(state))

    const status = json(await ok(["status", "--json"], at(alice, work)))
    expect(status.changes).toEqual([])
    expect(status.invalid_paths).toEqual([{
      path: "d/.grove/x.txt",
      reason: "tracked, but 'd/.grove' is taken for '.grove', where grove keeps a checkout's own files: move it out of 'd/.grove'"
    }])
    fs.writeFileSync(path.join(work, "x.txt"), "edited\n")
    const refused = await grove(["push", "--json"], at(alice, work))
    expect(refused.code, refused.stdout + refused.stderr).not.toBe(0)
    expect(json(refused)).toMatchObject({ code: "invalid_path" })
    expect(json(refused).error).toContain("d/.grove/x.txt: tracked, but 'd/.grove' is taken")
    const as = api(server.url, alice.env!["SERVICE_API_KEY"])
    const headOf = async () => (await as.get("/alice/legacy/branches/one")).body.head
    expect(await headOf()).toBe(nested.commit.hash)

    fs.rmSync(path.join(work, "d/.grove/x.txt"))
    expect(json(await ok(["status", "--json"], at(alice, work)))).toMatchObject({
      changes: [{ path: "d/.grove/x.txt", change_type: "deleted" }, { path: "x.txt", change_type: "modified" }],
      invalid_paths: []
    })
    await ok(["push", "--json"], at(alice, work))
    const head = await headOf()
    expect(head).not.toBe(nested.commit.hash)
    const tree = (await as.get(`/alice/legacy/tree/${head}`)).body
    expect(JSON.stringify(tree)).not.toContain(".grove")
    expect(JSON.stringify(tree)).toContain("x.txt")
  }, 120_000)
})
