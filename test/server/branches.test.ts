/**
 * Branch and content endpoints of the spec against the real server: create, list, get (with read
 * receipts), close (idempotent), reopen, rename (503), names that need percent-encoding, directory
 * listings, and the organization quota refusing a push while leaving nothing referenced.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let ann: string
let ben: string

beforeAll(async () => {
  server = await startServer({ env: { GROVE_ORG_QUOTA_BYTES: String(64 * 1024) } })
  ann = await server.createUser("ann")
  ben = await server.createUser("ben")
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const enc = encodeURIComponent

describe("branches", () => {
  it("creates, lists, reads and refuses bad names", async () => {
    const a = api(server.url, ann)
    expect((await a.post("/repos", { name: "trunk", is_public: true })).status).toBe(201)
    const created = await a.post("/ann/trunk/branches", { name: "feature/x-y", description: "Spaces and slashes" })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ name: "feature/x-y", parent_branch: "main", status: "open", head: null, description: "Spaces and slashes", created_by: "ann" })
    expect((await a.post("/ann/trunk/branches", { name: "feature/x-y" })).status).toBe(409)
    // git's check-ref-format rules too (issue 20 item 5): what git refuses, no branch is called.
    for (const name of ["a\nb", "tab\there", "nul\u0000", "", " lead", "-x", "a..b", "x.lock", "a/x.lock", "@{u}", "@", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\\b", "a/", "/a", "a//b", "a.", ".a", "a/.b"]) {
      const bad = await a.post("/ann/trunk/branches", { name })
      expect(bad.status, name).toBe(400)
      expect(isErrorBody(bad.body)).toBe(true)
    }
    expect((await a.post("/ann/trunk/branches", { name: "orphan", parent_branch: "nope" })).status).toBe(404)
    // Names git accepts with '-', '.', '@' inside still work.
    for (const name of ["fix/-dash", "v1.2", "a@b", "x.lockx"]) expect((await a.post("/ann/trunk/branches", { name })).status, name).toBe(201)

    const one = await a.get(`/ann/trunk/branches/${enc("feature/x-y")}`)
    expect(one.status).toBe(200)
    expect(one.body.name).toBe("feature/x-y")
    expect((await a.get("/ann/trunk/branches/missing")).status).toBe(404)

    const list = await a.get("/ann/trunk/branches")
    const names = list.body.branches.map((b: { name: string }) => b.name)
    expect(names).toEqual(expect.arrayContaining(["main", "feature/x-y", "fix/-dash", "v1.2", "a@b", "x.lockx"]))
    expect(names).toHaveLength(6)
    expect((await a.get("/ann/trunk/branches?status=closed")).body.branches).toEqual([])
    expect((await a.get("/ann/trunk/branches?status=weird")).status).toBe(400)

    // Someone else may read a public repository but not write to it.
    const b = api(server.url, ben)
    expect((await b.get("/ann/trunk/branches")).status).toBe(200)
    expect((await b.post("/ann/trunk/branches", { name: "intruder" })).status).toBe(403)
    expect((await api(server.url).post("/ann/trunk/branches", { name: "anon" })).status).toBe(401)
  })

  it("records who read a branch and shows the others", async () => {
    const a = api(server.url, ann)
    const b = api(server.url, ben)
    const path = `/ann/trunk/branches/${enc("feature/x-y")}?record_read=1`
    const first = await a.get(path)
    expect(first.body.readers).toEqual([])
    const second = await b.get(path)
    expect(second.body.readers.map((r: { name: string }) => r.name)).toEqual(["ann"])
    const third = await a.get(path)
    expect(third.body.readers.map((r: { name: string }) => r.name)).toEqual(["ben"])
    expect((await a.get(`/ann/trunk/branches/${enc("feature/x-y")}`)).body.readers).toBeUndefined()
    expect((await api(server.url).get(path)).status).toBe(401)
  })

  it("closes idempotently, reopens only closed branches, and never renames", async () => {
    const a = api(server.url, ann)
    const path = `/ann/trunk/branches/${enc("feature/x-y")}`
    const closed = await a.post(`${path}/close`)
    expect(closed.status).toBe(200)
    expect(closed.body.status).toBe("closed")
    expect((await a.post(`${path}/close`)).body.status).toBe("closed")
    const reopened = await a.post(`${path}/reopen`)
    expect(reopened.body.status).toBe("open")
    const again = await a.post(`${path}/reopen`)
    expect(again.status).toBe(400)
    expect(again.body.code).toBe("branch_open")
    const rename = await a.post(`${path}/rename`, { name: "other" })
    expect(rename.status).toBe(503)
    expect(isErrorBody(rename.body)).toBe(true)
    expect((await a.post("/ann/trunk/branches/main/close")).status).toBe(400)
    expect((await a.post("/ann/trunk/branches/missing/close")).status).toBe(404)
  })
})

describe("content listings and quota", () => {
  it("lists directories at a commit or a branch head", async () => {
    const a = api(server.url, ann)
    await a.post("/repos", { name: "tree" })
    const c = buildCommit({ branch: "t", files: { "README.md": "r", "src/a.ts": "a", "src/lib/b.ts": "bb", "run.sh": { content: "#!", mode: "executable" } } })
    expect((await a.post("/ann/tree/push", pushBody({ branch: "t", commits: [c] }))).body.success).toBe(true)
    const root = await a.get(`/ann/tree/tree/${c.commit.hash}`)
    expect(root.status).toBe(200)
    expect(root.body).toMatchObject({ commit: c.commit.hash, path: "", hash: c.commit.manifest_hash })
    expect(root.body.entries.map((e: { name: string; kind: string }) => `${e.kind}:${e.name}`)).toEqual(["blob:README.md", "blob:run.sh", "tree:src"])
    expect(root.body.entries.find((e: { name: string }) => e.name === "run.sh")).toMatchObject({ mode: "executable", size: 2 })
    const sub = await a.get(`/ann/tree/tree/${c.commit.hash}/src/lib`)
    expect(sub.body.entries).toEqual([expect.objectContaining({ name: "b.ts", path: "src/lib/b.ts", kind: "blob", size: 2 })])
    expect((await a.get("/ann/tree/tree/t/src")).body.entries.map((e: { name: string }) => e.name)).toEqual(["a.ts", "lib"])
    expect((await a.get(`/ann/tree/tree/${c.commit.hash}/README.md`)).status).toBe(400)
    expect((await a.get(`/ann/tree/tree/${c.commit.hash}/nope`)).status).toBe(404)
    expect((await a.get(`/ann/tree/tree/${"0".repeat(64)}`)).status).toBe(404)
    expect((await api(server.url, ben).get(`/ann/tree/tree/${c.commit.hash}`)).status).toBe(404)
  })

  it("refuses a push past the organization's quota and references nothing", async () => {
    const a = api(server.url, ann)
    await a.post("/repos", { name: "full" })
    const before = (await a.get("/orgs/ann/storage")).body
    expect(before.quota_bytes).toBe(64 * 1024)
    const sizeBefore = (await a.get("/ann/full/size")).body
    const bytes = (seed: number) => Uint8Array.from({ length: 40 * 1024 }, (_, i) => (i * seed + seed) & 0xff)
    const ok = buildCommit({ branch: "q", files: { "one.bin": bytes(7) } })
    expect((await a.post("/ann/full/push", pushBody({ branch: "q", commits: [ok] }))).body.success).toBe(true)
    const over = buildCommit({ branch: "q", parent: ok, files: { "one.bin": bytes(7), "two.bin": bytes(13) } })
    const refused = await a.post("/ann/full/push", pushBody({ branch: "q", commits: [over] }))
    expect(refused.status).toBe(413)
    expect(refused.body.code).toBe("quota_exceeded")
    expect(refused.body.error).toMatch(/quota/)
    expect((await a.get("/ann/full/branches/q")).body.head).toBe(ok.commit.hash)
    const after = (await a.get("/orgs/ann/storage")).body
    expect(after.used_bytes - before.used_bytes).toBe(40 * 1024)
    expect((await a.get("/ann/full/size")).body.size_bytes - sizeBefore.size_bytes).toBe(40 * 1024)
    // The up-front check of chunks/check says the same before anything is uploaded.
    const check = await a.post("/ann/full/chunks/check", { hashes: ["a".repeat(64)], sizes: [1024 * 1024], chunk_batch_protocol: "bounded_v1" })
    expect(check.status).toBe(413)
  })
})
