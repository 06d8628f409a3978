/**
 * A hash reference never grants withheld content (issue 20, item 2). bob is a member of acme, and
 * `secret/** @alice` in `.oak/PERMISSIONS` withholds `secret/` of acme/app from him. Knowing the hash H
 * of `secret/keys.txt` (a pull names it in a tree) must not let him place H at a path he may read —
 * through a push, a push to his own repository of the organization, a staged push, or the presence
 * checks — and tree listings do not show him the file. Blobs count as present for a caller only where
 * it may read them at a branch head, or when it uploaded them itself (it had the bytes).
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { batchBody, buildCommit, chunkRefs, inlineBlobs, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let server: GroveServer
const tokens: Record<string, string> = {}
const as = (user: string) => api(server.url, tokens[user])

const secret = new TextEncoder().encode("DEPLOY_KEY=hunter2-and-more\n")
const H = Blake3.hash(secret)
const FILES = {
  "README.md": "# app\n",
  "src/app.ts": "export const app = 1\n",
  "secret/keys.txt": secret,
  ".oak/PERMISSIONS": "secret/** @alice\n"
}
let mainHead: string
let mainBuilt: ReturnType<typeof buildCommit>

beforeAll(async () => {
  server = await startServer()
  for (const user of ["alice", "bob", "carol"]) tokens[user] = await server.createUser(user)
  expect((await as("alice").post("/orgs", { slug: "acme", name: "Acme" })).status).toBe(201)
  for (const user of ["bob", "carol"]) expect((await as("alice").post("/orgs/acme/members", { username: user })).status).toBe(201)
  expect((await as("alice").post("/repos", { name: "app", organization_slug: "acme" })).status).toBe(201)
  mainBuilt = buildCommit({ branch: "setup", files: FILES })
  expect((await as("alice").post("/acme/app/push", pushBody({ branch: "setup", commits: [mainBuilt] }))).body.success).toBe(true)
  expect((await as("alice").post("/acme/app/branches/setup/merge")).status).toBe(200)
  mainHead = (await as("alice").get("/acme/app/branches/main")).body.head
  // bob's own repository in the same organization (the dedup boundary).
  const own = await as("bob").post("/repos", { name: "bobs", organization_slug: "acme" })
  expect(own.status, JSON.stringify(own.body)).toBe(201)
  // The permissions hold: bob cannot read the file, alice can.
  expect((await as("bob").get("/acme/app/raw/main/secret/keys.txt")).status).toBe(404)
  expect((await as("alice").get("/acme/app/raw/main/secret/keys.txt")).status).toBe(200)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

/** A commit with `files` (a full tree), pushed without any blob bytes: a hash reference only. */
const hashOnly = (branch: string, files: Record<string, string | Uint8Array>, repo = "acme/app", user = "bob", parent?: string) => {
  const c = buildCommit({ branch, files, ...(parent === undefined ? {} : { parentHash: parent }) })
  return { c, reply: as(user).post(`/${repo}/push`, pushBody({ branch, commits: [c], blobs: [] })) }
}

const rawOf = (user: string, repo: string, commit: string, path: string) => as(user).get(`/${repo}/raw/${commit}/${path}`)

describe("a hash reference grants no withheld content", () => {
  it("the tree listing leaves the withheld file out (no hash, no size); the owner still sees it", async () => {
    const bob = await as("bob").get("/acme/app/tree/main/secret")
    expect(bob.status).toBe(200)
    expect(bob.body.entries).toEqual([])
    expect(JSON.stringify(bob.body)).not.toContain(H)
    const root = await as("bob").get("/acme/app/tree/main")
    expect(root.body.entries.map((e: { path: string }) => e.path).sort()).toEqual([".oak", "README.md", "secret", "src"])
    expect((await as("bob").get("/acme/app/tree/main/secret/keys.txt")).status).toBe(404)
    const alice = await as("alice").get("/acme/app/tree/main/secret")
    expect(alice.body.entries).toEqual([expect.objectContaining({ name: "keys.txt", hash: H, size: secret.length })])
  })

  it("push: a tree naming H at a readable path without its bytes is refused, and blobs/info does not hand H out afterwards", async () => {
    const { c, reply } = hashOnly("leak1", { "leak.txt": secret })
    const refused = await reply
    expect(refused.status, JSON.stringify(refused.body)).toBe(400)
    expect(refused.body).toMatchObject({ code: "missing_blob" })
    // The blob as a chunk mapping onto the stored chunk H: refused too.
    const mapped = await as("bob").post("/acme/app/push", pushBody({
      branch: "leak1",
      commits: [c],
      blobs: [{ hash: H, content: [], size: secret.length, chunks: [{ hash: H, offset: 0, size: secret.length }] }]
    }))
    expect(mapped.status, JSON.stringify(mapped.body)).toBe(400)
    expect(mapped.body).toMatchObject({ code: "missing_chunk" })
    expect((await rawOf("bob", "acme/app", c.commit.hash, "leak.txt")).status).toBe(404)
    expect((await as("bob").get("/acme/app/branches/leak1")).status).toBe(404)
    for (const reader of ["bob", "carol"]) {
      const info = await as(reader).post("/acme/app/blobs/info", { hashes: [H] })
      expect(info.status).toBe(200)
      expect(info.body.blobs, reader).toEqual([])
      expect(info.body.restricted, reader).toEqual([H])
    }
  })

  it("push: secret/'s stored tree placed at a readable path is refused", async () => {
    // leak/ holds exactly what secret/ holds: its tree is the repository's already, so only the new root is sent.
    const c = buildCommit({ branch: "leak2", files: { ...FILES, "leak/keys.txt": secret }, parentHash: mainHead, parentSnapshot: mainBuilt.snapshot })
    const secretTree = mainBuilt.trees.find((t) => t.entries.some((e) => e.name === "keys.txt"))!.hash
    expect(c.trees.some((t) => t.hash === secretTree)).toBe(true)
    const body = { ...pushBody({ branch: "leak2", commits: [c], blobs: [] }), trees: c.trees.filter((t) => t.hash === c.commit.manifest_hash) }
    const refused = await as("bob").post("/acme/app/push", body)
    expect(refused.status, JSON.stringify(refused.body)).toBe(400)
    expect(refused.body).toMatchObject({ code: "missing_blob" })
    expect((await rawOf("bob", "acme/app", c.commit.hash, "leak/keys.txt")).status).toBe(404)
  })

  it("push: bob may still change other files of a tree that keeps secret/ as it is", async () => {
    const files = { ...FILES, "src/app.ts": "export const app = 2\n" }
    const c = buildCommit({ branch: "bob-work", files, parentHash: mainHead, parentSnapshot: mainBuilt.snapshot })
    const changed = new Set([c.snapshot.get("src/app.ts")!.hash])
    const pushed = await as("bob").post("/acme/app/push", pushBody({ branch: "bob-work", commits: [c], blobs: inlineBlobs(c, changed) }))
    expect(pushed.body, JSON.stringify(pushed.body)).toMatchObject({ success: true })
    // ...and still cannot read the file there.
    expect((await rawOf("bob", "acme/app", c.commit.hash, "secret/keys.txt")).status).toBe(404)
  })

  it("own repository in the organization: refused without the bytes; blobs/check, chunks/check and chunks/uploaded say missing", async () => {
    const { c, reply } = hashOnly("leak", { "leak.txt": secret }, "acme/bobs")
    const refused = await reply
    expect(refused.status, JSON.stringify(refused.body)).toBe(400)
    expect(refused.body).toMatchObject({ code: "missing_blob" })
    expect((await rawOf("bob", "acme/bobs", c.commit.hash, "leak.txt")).status).toBe(404)

    expect((await as("bob").post("/acme/bobs/blobs/check", { hashes: [H] })).body).toEqual({ missing: [H] })
    expect((await as("bob").post("/acme/bobs/chunks/check", { hashes: [H], sizes: [secret.length] })).body)
      .toEqual({ missing: [{ hash: H, upload_url: null }] })
    const confirmed = await as("bob").post("/acme/bobs/chunks/uploaded", { hashes: [{ hash: H, size: secret.length }] })
    expect(confirmed.status).toBe(400)
    expect(confirmed.body).toMatchObject({ code: "missing_chunk" })
    // The same checks on acme/app itself.
    expect((await as("bob").post("/acme/app/blobs/check", { hashes: [H] })).body).toEqual({ missing: [H] })
    expect((await as("bob").post("/acme/app/chunks/check", { hashes: [H] })).body).toEqual({ missing: [{ hash: H, upload_url: null }] })
    expect((await as("bob").post("/acme/app/chunks/uploaded", { hashes: [{ hash: H, size: secret.length }] })).status).toBe(400)

    // alice reads secret/: for her H is there (dedup still works for those who may read it).
    expect((await as("alice").post("/acme/bobs/blobs/check", { hashes: [H] })).body).toEqual({ missing: [] })
    expect((await as("alice").post("/acme/bobs/chunks/check", { hashes: [H] })).body).toEqual({ missing: [] })
  })

  it("staged-v1: a batch naming H without its bytes is refused, and the finalizer publishes nothing", async () => {
    const c = buildCommit({ branch: "leak3", files: { "leak.txt": secret } })
    const branch = { name: "leak3", description: null, parent_branch: "main", status: "open", created_at: "2026-11-25T10:00:00+00:00" }
    const stageId = `stage-leak-${Date.now().toString(36)}`
    const batch = await as("bob").post("/acme/app/push/staged-v1", {
      stage_id: stageId,
      expected_branch_head: null,
      branch,
      finalize: false,
      commits: [c.commit],
      blobs: [],
      trees: c.trees
    })
    expect(batch.status, JSON.stringify(batch.body)).toBe(400)
    expect(batch.body).toMatchObject({ code: "missing_blob" })
    const finalized = await as("bob").post("/acme/app/push/staged-v1", {
      stage_id: stageId,
      expected_branch_head: null,
      branch,
      finalize: true,
      target_head: c.commit.hash,
      commits: [],
      blobs: [],
      trees: []
    })
    expect(finalized.body?.success, JSON.stringify(finalized.body)).not.toBe(true)
    expect((await rawOf("bob", "acme/app", c.commit.hash, "leak.txt")).status).toBe(404)
    expect((await as("bob").get("/acme/app/branches/leak3")).status).toBe(404)
  })

  it("chunks of a large withheld file (10 MiB or more) are missing to bob, cannot be confirmed, mapped or downloaded", async () => {
    const big = new Uint8Array(11 * 1024 * 1024)
    for (let i = 0; i < big.length; i++) big[i] = (i * 2654435761) >>> 24
    const refs = chunkRefs(big)
    expect(refs.length).toBeGreaterThan(1)
    const hashes = refs.map((r) => r.hash)
    const blobs = [{ hash: Blake3.hash(big), content: [], size: big.length, chunks: refs.map(({ hash, offset, size }) => ({ hash, offset, size })) }]
    const upload = await fetch(`${server.url}/api/acme/app/chunks/batch`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.alice}`, "content-type": "application/octet-stream" },
      body: batchBody(refs)
    })
    expect(upload.status).toBe(200)
    const c = buildCommit({ branch: "big-secret", files: { ...FILES, "secret/big.bin": big }, parentHash: mainHead, parentSnapshot: mainBuilt.snapshot })
    const pushed = await as("alice").post("/acme/app/push", pushBody({ branch: "big-secret", commits: [c], blobs }))
    expect(pushed.body, JSON.stringify(pushed.body)).toMatchObject({ success: true })

    for (const repo of ["acme/app", "acme/bobs"]) {
      const missing = await as("bob").post(`/${repo}/chunks/check`, { hashes })
      expect(missing.body.missing.map((m: { hash: string }) => m.hash), repo).toEqual(hashes)
      expect((await as("bob").post(`/${repo}/chunks/uploaded`, { hashes: [{ hash: hashes[0], size: refs[0]!.size }] })).status, repo).toBe(400)
    }
    const leak = buildCommit({ branch: "big-leak", files: { "big.bin": big } })
    const mapped = await as("bob").post("/acme/bobs/push", pushBody({ branch: "big-leak", commits: [leak], blobs }))
    expect(mapped.status, JSON.stringify(mapped.body)).toBe(400)
    expect(mapped.body).toMatchObject({ code: "missing_chunk" })
    const download = await as("bob").post("/acme/app/chunks/download", { hashes, chunk_batch_protocol: "bounded_v1" })
    expect(download.body.chunks).toEqual([])
    expect(download.body.restricted).toEqual(hashes)
    // alice reads secret/: nothing to upload.
    expect((await as("alice").post("/acme/bobs/chunks/check", { hashes })).body).toEqual({ missing: [] })
  })

  it("with the bytes, bob's push is accepted: he uploaded them, so nothing is granted", async () => {
    const put = await fetch(`${server.url}/api/acme/bobs/chunks/${H}`, { method: "PUT", headers: { authorization: `Bearer ${tokens.bob}` }, body: secret.slice() })
    expect(put.status).toBe(200)
    expect((await as("bob").post("/acme/bobs/blobs/check", { hashes: [H] })).body).toEqual({ missing: [] })
    // His upload is his own: for carol, who never uploaded it, H is still missing.
    expect((await as("carol").post("/acme/bobs/blobs/check", { hashes: [H] })).body).toEqual({ missing: [H] })
    const { c, reply } = hashOnly("own-copy", { "copy.txt": secret }, "acme/bobs")
    expect((await reply).body).toMatchObject({ success: true })
    const raw = await fetch(`${server.url}/api/acme/bobs/raw/${c.commit.hash}/copy.txt`, { headers: { authorization: `Bearer ${tokens.bob}` } })
    expect(Buffer.from(await raw.arrayBuffer()).equals(Buffer.from(secret))).toBe(true)
  })
})

describe("hash-addressed reads of what only history holds", () => {
  it("blobs/info and chunk downloads do not hand out a withheld blob no branch head has; a readable one they do", async () => {
    // Two commits on one branch: the first adds a withheld file and a readable one, the second removes both.
    const gone = new TextEncoder().encode("OLD_DEPLOY_KEY=retired\n")
    const H2 = Blake3.hash(gone)
    const first = buildCommit({
      branch: "history",
      files: { ...FILES, "secret/old.txt": gone, "docs/old.md": "old notes\n" },
      parentHash: mainHead,
      parentSnapshot: mainBuilt.snapshot
    })
    const second = buildCommit({ branch: "history", files: FILES, parent: first })
    expect((await as("alice").post("/acme/app/push", pushBody({ branch: "history", commits: [first, second] }))).body.success).toBe(true)
    const oldDoc = first.snapshot.get("docs/old.md")!.hash

    const info = await as("bob").post("/acme/app/blobs/info", { hashes: [H2, oldDoc] })
    expect(info.status).toBe(200)
    expect(info.body.blobs.map((b: { hash: string }) => b.hash)).toEqual([oldDoc])
    expect(info.body.restricted).toEqual([H2])
    const download = await as("bob").post("/acme/app/chunks/download", { hashes: [H2, oldDoc] })
    expect(download.body.chunks.map((c: { hash: string }) => c.hash)).toEqual([oldDoc])
    expect(download.body.restricted).toEqual([H2])
    const fetched = await fetch(`${server.url}/api/acme/app/chunks/fetch`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.bob}`, "content-type": "application/json" },
      body: JSON.stringify({ hashes: [H2] })
    })
    expect(fetched.status).toBe(200)
    expect((await fetched.arrayBuffer()).byteLength).toBe(0)
    // alice may read it: served.
    expect((await as("alice").post("/acme/app/blobs/info", { hashes: [H2] })).body.blobs.map((b: { hash: string }) => b.hash)).toEqual([H2])
  })
})
