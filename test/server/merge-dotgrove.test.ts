/**
 * No `.grove` (in any spelling a checkout takes for it: core Tree.isDotGrove), at the root or deeper, lands through a
 * merge, sync or revert, against the real server. A push holding one is refused (400 invalid_tree), but commits stored
 * before that check still exist: the test stops the server and plants them in the embedded database as a push
 * would have left them (trees, published commit rows, reached trees, branch heads), then starts it again on
 * the same data directory. The client refuses to check out such a root, so landing one would make main (or
 * the branch) unclonable: each is refused (409 invalid_tree) and every head stays where it was.
 */
import { PGlite } from "@electric-sql/pglite"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildCommit, type Built, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { plantCommit } from "../support/planted.ts"

let dataDir: string
let server: GroveServer
let token: string
const a = () => api(server.url, token)

/** main's first squash (clean), then the legacy commits main got before the push check: L1 adds `.GROVE/config.json`, L2 removes it. */
let s1: string
let l1: Built
let l2: Built
/** Branch `planted` (of main, forked at S1) adds `.grove/config.json`; branch `child` (of `planted`, forked at S1) adds c.txt. */
let planted: Built
let child: Built
/** Branch `nested` (of main, forked at S1) adds `docs/.grove/x.txt`. */
let nested: Built
/** Repository `held`: main's head H1 holds `.grove/config.json` (stored before the check); branch `other` (forked before H1) adds b.txt. */
let h1: Built
let heldFirst: Built
/** Repository `deep`: main's head D1 holds `d/.grove/x.txt` and `d/readme` (stored before the check); branch `touch` (forked before D1) adds `d/new.txt`. */
let d1: Built

const config = JSON.stringify({ remote: "http://attacker.invalid:9", owner: "mia", name: "legacy" })

const heads = async (repo = "legacy") => {
  const branches = (await a().get(`/mia/${repo}/branches`)).body.branches as ReadonlyArray<{ name: string; head: string | null }>
  return Object.fromEntries(branches.map((b) => [b.name, b.head]))
}

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-dotgrove-"))
  server = await startServer({ dataDir })
  token = await server.createUser("mia")
  expect((await a().post("/repos", { name: "legacy" })).status).toBe(201)
  const c1 = buildCommit({ branch: "one", files: { "a.txt": "a\n" } })
  expect((await a().post("/mia/legacy/push", pushBody({ branch: "one", commits: [c1], description: "a" }))).body).toMatchObject({ success: true })
  const merged = await a().post("/mia/legacy/branches/one/merge")
  expect(merged.status, JSON.stringify(merged.body)).toBe(200)
  s1 = merged.body.commit_hash
  // The push refuses these trees now: they can only be stored ones.
  const atS1 = { parentHash: s1, parentSnapshot: c1.snapshot }
  l1 = buildCommit({ branch: "main", files: { "a.txt": "a\n", ".GROVE/config.json": config }, ...atS1 })
  l2 = buildCommit({ branch: "main", files: { "a.txt": "a\n" }, parent: l1 })
  planted = buildCommit({ branch: "planted", files: { "a.txt": "a\n", ".grove/config.json": config }, ...atS1 })
  child = buildCommit({ branch: "child", files: { "a.txt": "a\n", "c.txt": "c\n" }, ...atS1 })
  nested = buildCommit({ branch: "nested", files: { "a.txt": "a\n", "docs/.grove/x.txt": "x\n" }, ...atS1 })
  for (const built of [planted, nested]) {
    const refused = await a().post("/mia/legacy/push", pushBody({ branch: built.commit.branch_name, commits: [built] }))
    expect(refused.body, JSON.stringify(refused.body)).toMatchObject({ code: "invalid_tree" })
  }

  expect((await a().post("/repos", { name: "held" })).status).toBe(201)
  heldFirst = buildCommit({ branch: "first", files: { "a.txt": "a\n" } })
  expect((await a().post("/mia/held/push", pushBody({ branch: "first", commits: [heldFirst], description: "a" }))).body).toMatchObject({ success: true })
  const heldS1 = await a().post("/mia/held/branches/first/merge")
  expect(heldS1.status, JSON.stringify(heldS1.body)).toBe(200)
  const atHeldS1 = { parentHash: heldS1.body.commit_hash, parentSnapshot: heldFirst.snapshot }
  h1 = buildCommit({ branch: "main", files: { "a.txt": "a\n", ".grove/config.json": config }, ...atHeldS1 })
  const other = buildCommit({ branch: "other", files: { "a.txt": "a\n", "b.txt": "b\n" }, ...atHeldS1 })
  expect((await a().post("/mia/held/push", pushBody({ branch: "other", commits: [other], description: "b" }))).body).toMatchObject({ success: true })

  expect((await a().post("/repos", { name: "deep" })).status).toBe(201)
  const deepFirst = buildCommit({ branch: "first", files: { "a.txt": "a\n" } })
  expect((await a().post("/mia/deep/push", pushBody({ branch: "first", commits: [deepFirst], description: "a" }))).body).toMatchObject({ success: true })
  const deepS1 = await a().post("/mia/deep/branches/first/merge")
  expect(deepS1.status, JSON.stringify(deepS1.body)).toBe(200)
  const atDeepS1 = { parentHash: deepS1.body.commit_hash, parentSnapshot: deepFirst.snapshot }
  d1 = buildCommit({ branch: "main", files: { "a.txt": "a\n", "d/.grove/x.txt": "x\n", "d/readme": "r\n" }, ...atDeepS1 })
  const touch = buildCommit({ branch: "touch", files: { "a.txt": "a\n", "d/new.txt": "n\n" }, ...atDeepS1 })
  expect((await a().post("/mia/deep/push", pushBody({ branch: "touch", commits: [touch], description: "t" }))).body).toMatchObject({ success: true })

  await server.stop()
  const db = await PGlite.create(path.join(dataDir, "db"))
  const deepId = await plantCommit(db, "deep", d1)
  await db.query(`UPDATE branches SET head = $2 WHERE repo_id = $1 AND name = 'main'`, [deepId, d1.commit.hash])
  await db.query(`UPDATE repositories SET head = $2 WHERE id = $1`, [deepId, d1.commit.hash])
  const heldId = await plantCommit(db, "held", h1)
  await db.query(`UPDATE branches SET head = $2 WHERE repo_id = $1 AND name = 'main'`, [heldId, h1.commit.hash])
  await db.query(`UPDATE repositories SET head = $2 WHERE id = $1`, [heldId, h1.commit.hash])
  let repoId = ""
  for (const built of [l1, l2, planted, child, nested]) repoId = await plantCommit(db, "legacy", built)
  await db.query(`UPDATE branches SET head = $2 WHERE repo_id = $1 AND name = 'main'`, [repoId, l2.commit.hash])
  await db.query(`UPDATE repositories SET head = $2 WHERE id = $1`, [repoId, l2.commit.hash])
  for (const [name, parent, head] of [["planted", null, planted], ["child", "planted", child], ["nested", null, nested]] as const) {
    await db.query(
      `INSERT INTO branches (repo_id, name, description, parent_branch, head, created_by, created_at) VALUES ($1, $2, $3, $4, $5, 'mia', '2026-11-22T10:00:00+00:00')`,
      [repoId, name, name, parent, head.commit.hash]
    )
  }
  await db.close()
  server = await startServer({ dataDir })
}, 300_000)

afterAll(async () => {
  await server?.stop()
  if (dataDir !== undefined) fs.rmSync(dataDir, { recursive: true, force: true })
})

describe("a root .grove from a stored commit", () => {
  const before = () => ({ main: l2.commit.hash, planted: planted.commit.hash, child: child.commit.hash })

  it("merge: 409 invalid_tree naming the entry, main unchanged; the preview says not mergeable and why", async () => {
    const preview = await a().get("/mia/legacy/branches/planted/merge-preview")
    expect(preview.status).toBe(200)
    expect(preview.body).toMatchObject({ merge: "not_mergeable", conflict_paths: [] })
    expect(preview.body.reason).toContain(`".grove"`)
    const merged = await a().post("/mia/legacy/branches/planted/merge")
    expect(merged.status, JSON.stringify(merged.body)).toBe(409)
    expect(merged.body).toMatchObject({ code: "invalid_tree" })
    expect(merged.body.error).toContain(`".grove"`)
    expect(merged.body.conflict_paths).toBeUndefined()
    expect(await heads()).toMatchObject(before())
    expect((await a().get("/mia/legacy")).body.head).toBe(l2.commit.hash)
    expect((await a().get("/mia/legacy/branches/planted")).body).toMatchObject({ status: "open" })
  })

  it("sync of a branch with a parent that holds one: 409 invalid_tree, the branch unchanged", async () => {
    const synced = await a().post("/mia/legacy/branches/child/sync")
    expect(synced.status, JSON.stringify(synced.body)).toBe(409)
    expect(synced.body).toMatchObject({ code: "invalid_tree" })
    expect(await heads()).toMatchObject(before())
  })

  it("revert of the commit that removed one from main: 409 invalid_tree (the spelling stored), main unchanged", async () => {
    const reverted = await a().post(`/mia/legacy/commits/${l2.commit.hash}/revert`)
    expect(reverted.status, JSON.stringify(reverted.body)).toBe(409)
    expect(reverted.body).toMatchObject({ code: "invalid_tree" })
    expect(reverted.body.error).toContain(`".GROVE"`)
    expect(await heads()).toMatchObject(before())
  })

  it("a push whose root is a stored tree holding one (the push carries no tree) is refused all the same", async () => {
    const reused = buildCommit({ branch: "reuse", files: { "a.txt": "a\n", ".grove/config.json": config }, parentHash: s1, parentSnapshot: l2.snapshot })
    expect(reused.commit.manifest_hash).toBe(planted.commit.manifest_hash)
    const refused = await a().post("/mia/legacy/push", { ...pushBody({ branch: "reuse", commits: [reused] }), trees: [] })
    expect([refused.status, refused.body.code], JSON.stringify(refused.body)).toEqual([400, "invalid_tree"])
    expect((await a().get("/mia/legacy/branches/reuse")).status).toBe(404)
  })

  it("main holding one already (stored before the check): a merge that keeps it is refused, one that removes it lands", async () => {
    const kept = await a().post("/mia/held/branches/other/merge")
    expect(kept.status, JSON.stringify(kept.body)).toBe(409)
    expect(kept.body).toMatchObject({ code: "invalid_tree" })
    expect((await heads("held")).main).toBe(h1.commit.hash)
    const fix = buildCommit({ branch: "fix", files: { "a.txt": "a\n" }, parent: h1 })
    expect((await a().post("/mia/held/push", pushBody({ branch: "fix", commits: [fix], description: "fix" }))).body).toMatchObject({ success: true })
    const fixed = await a().post("/mia/held/branches/fix/merge")
    expect(fixed.status, JSON.stringify(fixed.body)).toBe(200)
    const root = (await a().get(`/mia/held/tree/${fixed.body.commit_hash}`)).body
    expect(JSON.stringify(root)).not.toContain(".grove")
    expect(JSON.stringify(root)).toContain("a.txt")
  })
})

describe("a .grove below the root from a stored commit", () => {
  it("merge: 409 invalid_tree naming where, main unchanged; the preview says not mergeable", async () => {
    const preview = await a().get("/mia/legacy/branches/nested/merge-preview")
    expect(preview.body).toMatchObject({ merge: "not_mergeable", conflict_paths: [] })
    expect(preview.body.reason).toContain(`".grove" (at 'docs/.grove')`)
    const merged = await a().post("/mia/legacy/branches/nested/merge")
    expect(merged.status, JSON.stringify(merged.body)).toBe(409)
    expect(merged.body).toMatchObject({ code: "invalid_tree" })
    expect(merged.body.error).toContain(`".grove" (at 'docs/.grove')`)
    expect((await heads()).main).toBe(l2.commit.hash)
    expect((await a().get("/mia/legacy/branches/nested")).body).toMatchObject({ status: "open" })
  })

  it("main holding one already (stored before the check): a merge rebuilding its directory is refused, naming where", async () => {
    const merged = await a().post("/mia/deep/branches/touch/merge")
    expect(merged.status, JSON.stringify(merged.body)).toBe(409)
    expect(merged.body).toMatchObject({ code: "invalid_tree" })
    expect(merged.body.error).toContain(`".grove" (at 'd/.grove')`)
    expect(merged.body.error).toContain("remove or rename it")
    expect((await heads("deep")).main).toBe(d1.commit.hash)
  })

  it("a push reaching a subtree that holds one, stored in another repository of the organization, is refused", async () => {
    // The push carries its root only: `docs` (and `docs/.grove`) are the organization's, planted in `legacy`.
    const deep = buildCommit({ branch: "dedup", files: { "a.txt": "a\n", "docs/.grove/x.txt": "x\n" } })
    const docs = deep.trees.find((t) => t.hash === deep.commit.manifest_hash)!.entries.find((e) => e.name === "docs")!.hash
    expect(nested.trees.some((t) => t.hash === docs)).toBe(true)
    const body = { ...pushBody({ branch: "dedup", commits: [deep] }), trees: deep.trees.filter((t) => t.hash === deep.commit.manifest_hash) }
    const refused = await a().post("/mia/held/push", body)
    expect([refused.status, refused.body.code], JSON.stringify(refused.body)).toEqual([400, "invalid_tree"])
    expect(refused.body.error).toContain(`".grove"`)
    expect((await a().get("/mia/held/branches/dedup")).status).toBe(404)
  })
})
