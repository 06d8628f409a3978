/**
 * Dedup never grants access (issue 9, item 1). Objects are stored once per organization, but
 * `blobs/check`, `chunks/check`, `chunks/uploaded` and push verification count an object as present
 * only when the caller can read it already (a repository the caller, within its key's repository
 * limit, can read reaches it) or the caller uploaded it; anything else must be uploaded.
 *
 * The attack: a key limited to alice/pub learns that a blob of alice/priv exists, pushes a tree
 * naming it to pub without uploading it, and an anonymous raw read of pub serves the private bytes.
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { batchBody, buildCommit, chunkRefs, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let alice: string

const secret = new TextEncoder().encode("the launch code is 0000\n")
const secretHash = Blake3.hash(secret)
/** The private commit, pushed to alice/priv by alice's user key. */
let privCommit: ReturnType<typeof buildCommit>

const keyFor = async (body: Record<string, unknown>) => {
  const created = await api(server.url, alice).post("/api-keys", body)
  expect(created.status, JSON.stringify(created.body)).toBe(201)
  return created.body.key as string
}

const putChunk = (token: string, repo: string, hash: string, data: Uint8Array) =>
  fetch(`${server.url}/api/alice/${repo}/chunks/${hash}`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: data.slice() })

const anonymousRaw = (commit: string, path: string) => fetch(`${server.url}/api/alice/pub/raw/${commit}/${path}`)

beforeAll(async () => {
  server = await startServer()
  alice = await server.createUser("alice")
  const a = api(server.url, alice)
  expect((await a.post("/repos", { name: "pub" })).status).toBe(201)
  expect((await a.patch("/alice/pub/visibility", { is_public: true })).status).toBe(200)
  expect((await a.post("/repos", { name: "priv" })).status).toBe(201)
  privCommit = buildCommit({ branch: "secret", files: { "secret.txt": secret } })
  expect((await a.post("/alice/priv/push", pushBody({ branch: "secret", commits: [privCommit] }))).body.success).toBe(true)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

describe("a key limited to alice/pub cannot reach alice/priv's objects through dedup", () => {
  it("hears that priv's blob and chunk are missing, cannot confirm them, and cannot push them without the bytes", async () => {
    const kt = await keyFor({ name: "ci", repo: "alice/pub" })
    const k = api(server.url, kt)

    // The existence oracle: missing, as if the organization did not have it.
    const blobs = await k.post("/alice/pub/blobs/check", { hashes: [secretHash] })
    expect(blobs.status).toBe(200)
    expect(blobs.body).toEqual({ missing: [secretHash] })
    const chunks = await k.post("/alice/pub/chunks/check", { hashes: [secretHash], sizes: [secret.length] })
    expect(chunks.body).toEqual({ missing: [{ hash: secretHash, upload_url: null }] })
    // Nor does the upload confirmation tell the chunk's size.
    const confirmed = await k.post("/alice/pub/chunks/uploaded", { hashes: [{ hash: secretHash, size: secret.length }] })
    expect(confirmed.status).toBe(400)
    expect(isErrorBody(confirmed.body)).toBe(true)

    // A tree naming the blob, no blob uploaded: refused.
    const leak = buildCommit({ branch: "leak", files: { "secret.txt": secret } })
    const noBlob = await k.post("/alice/pub/push", pushBody({ branch: "leak", commits: [leak], blobs: [] }))
    expect(noBlob.status, JSON.stringify(noBlob.body)).toBe(400)
    expect(noBlob.body).toMatchObject({ code: "missing_blob" })
    // The blob as a chunk mapping onto the stored chunk: refused too.
    const mapped = await k.post("/alice/pub/push", pushBody({
      branch: "leak",
      commits: [leak],
      blobs: [{ hash: secretHash, content: [], size: secret.length, chunks: [{ hash: secretHash, offset: 0, size: secret.length }] }]
    }))
    expect(mapped.status, JSON.stringify(mapped.body)).toBe(400)
    expect(mapped.body).toMatchObject({ code: "missing_chunk" })
    // priv's own root tree, not sent: refused (its names are priv's too).
    const reuse = buildCommit({ branch: "leak", files: { "secret.txt": secret } })
    expect(reuse.commit.manifest_hash).toBe(privCommit.commit.manifest_hash)
    const noTree = await k.post("/alice/pub/push", { ...pushBody({ branch: "leak", commits: [reuse], blobs: [] }), trees: [] })
    expect(noTree.status, JSON.stringify(noTree.body)).toBe(400)
    expect(noTree.body).toMatchObject({ code: "missing_tree" })

    // Nothing reached pub: anonymous readers get nothing.
    expect((await k.get("/alice/pub/branches/leak")).status).toBe(404)
    expect((await anonymousRaw(leak.commit.hash, "secret.txt")).status).toBe(404)

    // With the bytes, the push is fine, and they are stored once.
    const usedBefore = (await api(server.url, alice).get("/orgs/alice/storage")).body.used_bytes as number
    expect((await putChunk(kt, "pub", secretHash, secret)).status).toBe(200)
    expect((await k.post("/alice/pub/chunks/check", { hashes: [secretHash] })).body).toEqual({ missing: [] })
    expect((await k.post("/alice/pub/chunks/uploaded", { hashes: [{ hash: secretHash, size: secret.length }] })).status).toBe(200)
    const pushed = await k.post("/alice/pub/push", pushBody({ branch: "leak", commits: [leak], blobs: [] }))
    expect(pushed.body, JSON.stringify(pushed.body)).toEqual({ success: true, new_head: leak.commit.hash, message: "ok" })
    expect((await api(server.url, alice).get("/orgs/alice/storage")).body.used_bytes).toBe(usedBefore)
    const raw = await anonymousRaw(leak.commit.hash, "secret.txt")
    expect(raw.status).toBe(200)
    expect(Buffer.from(await raw.arrayBuffer()).equals(Buffer.from(secret))).toBe(true)
  })

  it("does not see chunks another key uploaded to priv and never published", async () => {
    const privKey = await keyFor({ name: "priv-ci", repo: "alice/priv" })
    const pubKey = api(server.url, await keyFor({ name: "pub-ci", repo: "alice/pub" }))
    const staged = new TextEncoder().encode("unpublished draft\n")
    const stagedHash = Blake3.hash(staged)
    expect((await putChunk(privKey, "priv", stagedHash, staged)).status).toBe(200)
    expect((await api(server.url, privKey).post("/alice/priv/chunks/check", { hashes: [stagedHash] })).body).toEqual({ missing: [] })

    expect((await pubKey.post("/alice/pub/chunks/check", { hashes: [stagedHash] })).body).toEqual({ missing: [{ hash: stagedHash, upload_url: null }] })
    const c = buildCommit({ branch: "draft", files: { "draft.txt": staged } })
    const push = await pubKey.post("/alice/pub/push", pushBody({ branch: "draft", commits: [c], blobs: [] }))
    expect(push.status, JSON.stringify(push.body)).toBe(400)
    expect(push.body).toMatchObject({ code: "missing_blob" })
    expect((await anonymousRaw(c.commit.hash, "draft.txt")).status).toBe(404)
  })
})

describe("chunk-level dedup (files of 10 MiB or more)", () => {
  it("counts priv's chunks as present for alice's user key, and as missing for a key limited to pub", async () => {
    const big = new Uint8Array(11 * 1024 * 1024)
    for (let i = 0; i < big.length; i++) big[i] = (i * 2246822519) >>> 25
    const refs = chunkRefs(big)
    expect(refs.length).toBeGreaterThan(1)
    const hashes = refs.map((r) => r.hash)
    const blobs = [{ hash: Blake3.hash(big), content: [], size: big.length, chunks: refs.map(({ hash, offset, size }) => ({ hash, offset, size })) }]
    const a = api(server.url, alice)
    const upload = await fetch(`${server.url}/api/alice/priv/chunks/batch`, {
      method: "POST",
      headers: { authorization: `Bearer ${alice}`, "content-type": "application/octet-stream" },
      body: batchBody(refs)
    })
    expect(upload.status).toBe(200)
    const c = buildCommit({ branch: "big", files: { "big.bin": big } })
    expect((await a.post("/alice/priv/push", pushBody({ branch: "big", commits: [c], blobs }))).body.success).toBe(true)

    const k = api(server.url, await keyFor({ name: "pub-big", repo: "alice/pub" }))
    expect((await k.post("/alice/pub/chunks/check", { hashes })).body.missing.map((m: { hash: string }) => m.hash)).toEqual(hashes)
    const leak = buildCommit({ branch: "big-leak", files: { "big.bin": big } })
    const refused = await k.post("/alice/pub/push", pushBody({ branch: "big-leak", commits: [leak], blobs }))
    expect(refused.status, JSON.stringify(refused.body)).toBe(400)
    expect(refused.body).toMatchObject({ code: "missing_chunk" })
    expect((await anonymousRaw(leak.commit.hash, "big.bin")).status).toBe(404)

    // Alice's own key reads priv: nothing to upload, and the push to pub is accepted.
    expect((await a.post("/alice/pub/chunks/check", { hashes })).body).toEqual({ missing: [] })
    const shared = buildCommit({ branch: "big-shared", files: { "big.bin": big } })
    expect((await a.post("/alice/pub/push", pushBody({ branch: "big-shared", commits: [shared], blobs }))).body.success).toBe(true)
  })
})

describe("read keys and anonymous callers never get an answer about presence", () => {
  it("refuses blobs/check, chunks/check and push for a read key, a read key limited to pub, and no key", async () => {
    const readKey = await keyFor({ name: "ro", scope: "read" })
    const readPubKey = await keyFor({ name: "ro-pub", scope: "read", repo: "alice/pub" })
    const leak = buildCommit({ branch: "leak-ro", files: { "secret.txt": secret } })
    for (const [who, token, status] of [["read key", readKey, 403], ["read key on pub", readPubKey, 403], ["anonymous", undefined, 401]] as const) {
      const k = api(server.url, token)
      const blobs = await k.post("/alice/pub/blobs/check", { hashes: [secretHash] })
      expect(blobs.status, who).toBe(status)
      expect(isErrorBody(blobs.body), who).toBe(true)
      expect((await k.post("/alice/pub/chunks/check", { hashes: [secretHash] })).status, who).toBe(status)
      expect((await k.post("/alice/pub/chunks/uploaded", { hashes: [{ hash: secretHash, size: secret.length }] })).status, who).toBe(status)
      const push = await k.post("/alice/pub/push", pushBody({ branch: "leak-ro", commits: [leak], blobs: [] }))
      expect(push.status, who).toBe(status)
    }
    expect((await anonymousRaw(leak.commit.hash, "secret.txt")).status).toBe(404)
  })
})

describe("the legitimate dedup path", () => {
  it("a user key that can read priv dedups against it, and against what it uploaded itself", async () => {
    const a = api(server.url, alice)
    expect((await a.post("/alice/pub/blobs/check", { hashes: [secretHash] })).body).toEqual({ missing: [] })
    expect((await a.post("/alice/pub/chunks/check", { hashes: [secretHash] })).body).toEqual({ missing: [] })
    const c = buildCommit({ branch: "shared", files: { "copy.txt": secret } })
    const pushed = await a.post("/alice/pub/push", pushBody({ branch: "shared", commits: [c], blobs: [] }))
    expect(pushed.body, JSON.stringify(pushed.body)).toEqual({ success: true, new_head: c.commit.hash, message: "ok" })

    // Uploaded to priv by this user, not published yet: present for the same user in pub.
    const draft = new TextEncoder().encode("alice's own upload\n")
    const draftHash = Blake3.hash(draft)
    expect((await putChunk(alice, "priv", draftHash, draft)).status).toBe(200)
    expect((await a.post("/alice/pub/chunks/check", { hashes: [draftHash] })).body).toEqual({ missing: [] })
    const d = buildCommit({ branch: "own", files: { "own.txt": draft } })
    expect((await a.post("/alice/pub/push", pushBody({ branch: "own", commits: [d], blobs: [] }))).body.success).toBe(true)
  })
})
