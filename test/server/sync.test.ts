/**
 * The sync protocol against the real server: pushes (first, fast-forward, replay, conflict, force,
 * metadata-only), every verification rule of a push, pulls with `since` and `depth`, commits/info,
 * blobs and chunks endpoints, and the binary chunk routes.
 */
import { ApiSync } from "@grove/api"
import * as Blake3 from "@grove/core/objects/Blake3"
import * as Commit from "@grove/core/objects/Commit"
import * as Timestamp from "@grove/core/objects/Timestamp"
import * as Tree from "@grove/core/objects/Tree"
import * as http from "node:http"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { batchBody, buildCommit, chunkRefs, decodeBatch, inlineBlobs, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let token: string
let otherToken: string

beforeAll(async () => {
  server = await startServer()
  token = await server.createUser("sam")
  otherToken = await server.createUser("tina")
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

/** GET with the path exactly as written (no URL normalization). */
const statusOf = (url: string, bearer: string) =>
  new Promise<number>((resolve, reject) => {
    const u = new URL(url)
    const request = http.request({ host: u.hostname, port: u.port, path: url.slice(url.indexOf("/", 8)), headers: { authorization: `Bearer ${bearer}` } }, (response) => {
      response.resume()
      resolve(response.statusCode ?? 0)
    })
    request.on("error", reject)
    request.end()
  })

const newRepo = async (name: string) => {
  const created = await api(server.url, token).post("/repos", { name })
  expect(created.status).toBe(201)
  return api(server.url, token)
}

describe("push and pull", () => {
  it("publishes a first push, pulls it back whole, and fast-forwards", async () => {
    const a = await newRepo("first")
    const c1 = buildCommit({ branch: "feature", files: { "README.md": "hello\n", "src/a.ts": "export const a = 1\n", "bin/run": { content: "#!/bin/sh\n", mode: "executable" } } })
    const pushed = await a.post("/sam/first/push", pushBody({ branch: "feature", commits: [c1], description: "first feature" }))
    expect(pushed.status).toBe(200)
    expect(pushed.body).toEqual({ success: true, new_head: c1.commit.hash, message: "ok" })

    const branch = await a.get("/sam/first/branches/feature")
    expect(branch.status).toBe(200)
    expect(branch.body).toMatchObject({ name: "feature", head: c1.commit.hash, status: "open", description: "first feature", parent_branch: "main" })

    const pull = await a.get("/sam/first/pull?branch_name=feature")
    expect(pull.status).toBe(200)
    expect(pull.body.head).toBe(c1.commit.hash)
    expect(pull.body.commits.map((c: { hash: string }) => c.hash)).toEqual([c1.commit.hash])
    expect(pull.body.commits[0]).toMatchObject({ parent_hash: null, manifest_hash: c1.commit.manifest_hash, timestamp: c1.commit.timestamp })
    expect(new Set(pull.body.trees.map((t: { hash: string }) => t.hash))).toEqual(new Set(c1.trees.map((t) => t.hash)))
    // Blobs always go out as chunk references.
    for (const blob of pull.body.blobs) {
      expect(blob.content).toEqual([])
      expect(blob.chunks).toEqual([{ hash: blob.hash, offset: 0, size: blob.size }])
    }
    expect(pull.body.branches.map((b: { name: string }) => b.name).sort()).toEqual(["feature", "main"])

    const c2 = buildCommit({ branch: "feature", parent: c1, files: { "README.md": "hello again\n", "src/a.ts": "export const a = 1\n", "bin/run": { content: "#!/bin/sh\n", mode: "executable" } } })
    const ff = await a.post("/sam/first/push", pushBody({ branch: "feature", commits: [c2], expectedHead: c1.commit.hash }))
    expect(ff.body).toEqual({ success: true, new_head: c2.commit.hash, message: "ok" })

    const since = await a.get(`/sam/first/pull?branch_name=feature&since=${c1.commit.hash}`)
    expect(since.body.commits.map((c: { hash: string }) => c.hash)).toEqual([c2.commit.hash])
    const depth = await a.get("/sam/first/pull?branch_name=feature&depth=1")
    expect(depth.body.commits.map((c: { hash: string }) => c.hash)).toEqual([c2.commit.hash])
    const upToDate = await a.get(`/sam/first/pull?branch_name=feature&since=${c2.commit.hash}`)
    expect(upToDate.body.commits).toEqual([])

    // Replaying the same push is accepted and changes nothing.
    const replay = await a.post("/sam/first/push", pushBody({ branch: "feature", commits: [c1, c2] }))
    expect(replay.body).toEqual({ success: true, new_head: c2.commit.hash, message: "ok" })

    // A diverging push is a 200 with success: false and the server's head.
    const other = buildCommit({ branch: "feature", parent: c1, files: { "README.md": "diverged\n" } })
    const conflict = await a.post("/sam/first/push", pushBody({ branch: "feature", commits: [other] }))
    expect(conflict.status).toBe(200)
    expect(conflict.body).toEqual({ success: false, new_head: c2.commit.hash, message: "Conflict: remote head has changed. Pull first." })
    expect((await a.get("/sam/first/branches/feature")).body.head).toBe(c2.commit.hash)
    // ... and force moves it.
    const forced = await a.post("/sam/first/push", pushBody({ branch: "feature", commits: [other], force: true }))
    expect(forced.body).toEqual({ success: true, new_head: other.commit.hash, message: "ok" })

    // A pull from a since that is no longer on the branch (rewritten) or was never published: 409.
    const rewritten = await a.get(`/sam/first/pull?branch_name=feature&since=${c2.commit.hash}`)
    expect(rewritten.status).toBe(409)
    expect(rewritten.body.code).toBe("branch_rewritten")
    const unknown = await a.get(`/sam/first/pull?branch_name=feature&since=${"e".repeat(64)}`)
    expect(unknown.status).toBe(409)
    expect(unknown.body.code).toBe("since_unpublished")
    const forcedPull = await a.get(`/sam/first/pull?branch_name=feature&since=${c2.commit.hash}&force=true`)
    expect(forcedPull.status).toBe(200)
    expect(forcedPull.body.commits.map((c: { hash: string }) => c.hash)).toContain(other.commit.hash)

    // The answer is written without the endpoint's schema encoding (PullHandlers.pullJson): the same text, keys in the
    // schema's order and none it would drop.
    const raw = await fetch(`${server.url}/api/sam/first/pull?branch_name=feature`, { headers: { authorization: `Bearer ${token}` } })
    expect(raw.headers.get("content-type")).toBe("application/json")
    const text = await raw.text()
    const schema = ApiSync.PullResponse
    expect(text).toBe(JSON.stringify(Schema.encodeSync(schema)(Schema.decodeUnknownSync(schema)(JSON.parse(text)))))
  })

  it("refuses pushes to main, and hides private repositories from others", async () => {
    const a = await newRepo("guarded")
    const c = buildCommit({ branch: "main", files: { a: "x" } })
    const refused = await a.post("/sam/guarded/push", pushBody({ branch: "main", commits: [c] }))
    expect(refused.status).toBe(403)
    expect(refused.body.code).toBe("main_protected")
    expect(refused.body.error).toMatch(/merge/)
    const f = buildCommit({ branch: "f", files: { a: "x" } })
    expect((await api(server.url, otherToken).post("/sam/guarded/push", pushBody({ branch: "f", commits: [f] }))).status).toBe(404)
    expect((await api(server.url).get("/sam/guarded/pull")).status).toBe(404)
  })

  it("metadata-only pushes set the description and close, never reopen", async () => {
    const a = await newRepo("meta")
    const c = buildCommit({ branch: "m", files: { a: "1" } })
    await a.post("/sam/meta/push", pushBody({ branch: "m", commits: [c] }))
    const desc = await a.post("/sam/meta/push", pushBody({ branch: "m", commits: [], blobs: [], description: "Add the thing" }))
    expect(desc.body).toEqual({ success: true, new_head: c.commit.hash, message: "ok" })
    expect((await a.get("/sam/meta/branches/m")).body.description).toBe("Add the thing")
    const close = await a.post("/sam/meta/push", pushBody({ branch: "m", commits: [], blobs: [], status: "closed", closeReason: "superseded" }))
    expect(close.body.success).toBe(true)
    expect((await a.get("/sam/meta/branches/m")).body).toMatchObject({ status: "closed", close_reason: "superseded", description: "Add the thing" })
    await a.post("/sam/meta/push", pushBody({ branch: "m", commits: [], blobs: [], status: "open" }))
    expect((await a.get("/sam/meta/branches/m")).body.status).toBe("closed")
  })
})

describe("push verification", () => {
  const rejects = async (name: string, body: unknown, pattern: RegExp) => {
    const a = api(server.url, token)
    const reply = await a.post(`/sam/${name}/push`, body)
    expect(reply.status, JSON.stringify(reply.body)).toBe(400)
    expect(isErrorBody(reply.body)).toBe(true)
    expect(reply.body.error).toMatch(pattern)
    // Nothing was published.
    expect((await a.get(`/sam/${name}/branches/v`)).status).toBe(404)
  }

  it("rejects wrong hashes, missing parents, missing objects and lying file lists", async () => {
    await newRepo("verify")
    const c = buildCommit({ branch: "v", files: { "a.txt": "a", "d/b.txt": "b" } })
    const body = pushBody({ branch: "v", commits: [c] })

    await rejects("verify", { ...body, trees: body.trees.map((t, i) => i === 0 ? { ...t, hash: "0".repeat(64) } : t) }, /tree hash mismatch|is missing/)
    await rejects("verify", { ...body, commits: [{ ...body.commits[0], author: "mallory" }] }, /commit hash mismatch/)
    await rejects("verify", { ...body, commits: [{ ...body.commits[0], hash: body.commits[0]!.hash.toUpperCase() }] }, /64 lowercase hex/)
    await rejects("verify", { ...body, trees: body.trees.slice(1) }, /missing/)
    await rejects("verify", { ...body, blobs: body.blobs.slice(1) }, /was not uploaded/)
    await rejects("verify", { ...body, blobs: body.blobs.map((b, i) => i === 0 ? { ...b, content: [...b.content, 1] } : b) }, /bytes of content|does not hash/)

    const orphan = buildCommit({ branch: "v", parentHash: "a".repeat(64), files: { "a.txt": "a" } })
    await rejects("verify", pushBody({ branch: "v", commits: [orphan] }), /neither in the push nor published/)

    const lying = buildCommit({ branch: "v", files: { "a.txt": "a", "d/b.txt": "b" } })
    const lyingBody = pushBody({ branch: "v", commits: [lying] })
    // Drop one added file from the list: the hash does not cover `files`, the agreement check does.
    lyingBody.commits[0] = { ...lyingBody.commits[0]!, files: lyingBody.commits[0]!.files.slice(1) }
    await rejects("verify", lyingBody, /not accounted for|files list/)

    const c2 = buildCommit({ branch: "v", parent: c, files: { "a.txt": "a2", "d/b.txt": "b" } })
    await rejects("verify", pushBody({ branch: "v", commits: [c2, c] }), /before its parent/)
    const wrongBranch = buildCommit({ branch: "other", files: { "a.txt": "a" } })
    await rejects("verify", { ...pushBody({ branch: "v", commits: [wrongBranch] }) }, /is on branch 'other'/)
    const twoTips = buildCommit({ branch: "v", files: { "x": "x" } })
    await rejects("verify", pushBody({ branch: "v", commits: [c, twoTips] }), /one tip/)

    // The valid push still works after all of that.
    expect((await api(server.url, token).post("/sam/verify/push", body)).body.success).toBe(true)
  })

  it("checks every inline content value, which the wire schema leaves to the server (it only checks for an array)", async () => {
    await newRepo("bytes")
    const c = buildCommit({ branch: "v", files: { "a.txt": "abc" } })
    const body = pushBody({ branch: "v", commits: [c] })
    const withContent = (content: unknown) => ({ ...body, blobs: body.blobs.map((b) => ({ ...b, content })) })
    for (const bad of [[97, 98, 356], [97, 98, -1], [97, 98, 99.5], [97, 98, "c"], [97, 98, null]]) {
      await rejects("bytes", withContent(bad), /must be byte values 0-255/)
    }
    const notAnArray = await api(server.url, token).post("/sam/bytes/push", withContent("abc"))
    expect(notAnArray.status).toBe(400)
    expect(isErrorBody(notAnArray.body)).toBe(true)
    expect((await api(server.url, token).get("/sam/bytes/branches/v")).status).toBe(404)
    expect((await api(server.url, token).post("/sam/bytes/push", withContent([97, 98, 99]))).body.success).toBe(true)
  })
})

describe("objects", () => {
  it("uploads chunks (PUT and batch), dedups per organization, and serves them back", async () => {
    const a = await newRepo("chunky")
    await newRepo("chunky2")
    const big = new Uint8Array(12 * 1024 * 1024)
    for (let i = 0; i < big.length; i++) big[i] = (i * 2654435761) >>> 24
    const small = new TextEncoder().encode("small file\n")
    const refs = chunkRefs(big)
    expect(refs.length).toBeGreaterThan(2)
    const usedBefore = (await a.get("/orgs/sam/storage")).body.used_bytes as number

    const check = await a.post("/sam/chunky/chunks/check", { hashes: refs.map((r) => r.hash), sizes: refs.map((r) => r.size), chunk_batch_protocol: "bounded_v1" })
    expect(check.status).toBe(200)
    expect(check.body.missing).toEqual(refs.map((r) => ({ hash: r.hash, upload_url: null })))

    // A chunk whose bytes do not match its hash is refused and not stored.
    const bad = await fetch(`${server.url}/api/sam/chunky/chunks/${refs[0]!.hash}`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: refs[1]!.data.slice() })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: string }).error).toMatch(/do not hash/)

    const put = await fetch(`${server.url}/api/sam/chunky/chunks/${refs[0]!.hash}`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: refs[0]!.data.slice() })
    expect(put.status).toBe(200)
    const batch = await fetch(`${server.url}/api/sam/chunky/chunks/batch`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream" },
      body: batchBody([...refs.slice(1), { hash: Blake3.hash(small), data: small }])
    })
    expect(batch.status).toBe(200)
    const again = await a.post("/sam/chunky/chunks/check", { hashes: refs.map((r) => r.hash) })
    expect(again.body.missing).toEqual([])
    // Same organization: the other repository sees the chunks as present (dedup).
    expect((await a.post("/sam/chunky2/chunks/check", { hashes: refs.map((r) => r.hash) })).body.missing).toEqual([])

    const c = buildCommit({ branch: "b", files: { "big.bin": big, "small.txt": small } })
    const blobs = [{ hash: Blake3.hash(big), content: [], size: big.length, chunks: refs.map(({ hash, offset, size }) => ({ hash, offset, size })) }]
    // small.txt travels as its one chunk (uploaded in the batch above): no blob entry needed.
    const pushed = await a.post("/sam/chunky/push", pushBody({ branch: "b", commits: [c], blobs }))
    expect(pushed.body, JSON.stringify(pushed.body)).toEqual({ success: true, new_head: c.commit.hash, message: "ok" })

    const info = await a.post("/sam/chunky/blobs/info", { hashes: [Blake3.hash(big), Blake3.hash(small)] })
    expect(info.body.blobs.find((b: { hash: string }) => b.hash === Blake3.hash(big)).chunks).toHaveLength(refs.length)

    const fetched = await fetch(`${server.url}/api/sam/chunky/chunks/fetch`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ hashes: [...refs.map((r) => r.hash), "f".repeat(64)] })
    })
    expect(fetched.status).toBe(200)
    const frames = await decodeBatch(new Uint8Array(await fetched.arrayBuffer()))
    expect(frames.map((f) => f.hash)).toEqual(refs.map((r) => r.hash))
    expect(Buffer.concat(frames.map((f) => f.data)).equals(Buffer.from(big))).toBe(true)

    // The JSON download of clients without the bounded batch protocol: content as numbers (links: chunk-links.test.ts).
    const json = await a.post("/sam/chunky/chunks/download", { hashes: [Blake3.hash(small)] })
    expect(json.body.chunks).toEqual([{ hash: Blake3.hash(small), download_url: null, content: Array.from(small) }])
    const large = await a.post("/sam/chunky/chunks/download", { hashes: [refs[1]!.hash, refs[0]!.hash] })
    expect(large.body.chunks.map((x: { hash: string }) => x.hash)).toEqual([refs[1]!.hash, refs[0]!.hash])
    expect(Buffer.from(large.body.chunks[1].content).equals(Buffer.from(big.subarray(0, refs[0]!.size)))).toBe(true)

    // Raw file bytes at a commit, streamed.
    const raw = await fetch(`${server.url}/api/sam/chunky/raw/${c.commit.hash}/big.bin`, { headers: { authorization: `Bearer ${token}` } })
    expect(raw.status).toBe(200)
    expect(Buffer.from(await raw.arrayBuffer()).equals(Buffer.from(big))).toBe(true)
    const missing = await fetch(`${server.url}/api/sam/chunky/raw/${c.commit.hash}/nope.txt`, { headers: { authorization: `Bearer ${token}` } })
    expect(missing.status).toBe(404)
    // fetch() would normalize `..` away; send the path as written.
    for (const path of ["a/../small.txt", "a/%2E%2E/small.txt", "./small.txt"]) {
      expect(await statusOf(`${server.url}/api/sam/chunky/raw/${c.commit.hash}/${path}`, token)).toBe(400)
    }

    // Storage: the repository counts its blobs; the organization its chunks once.
    const size = await a.get("/sam/chunky/size")
    expect(size.body).toMatchObject({ size_bytes: big.length + small.length, objects: 2 })
    const storage = await a.get("/orgs/sam/storage")
    expect(storage.body.used_bytes - usedBefore).toBe(big.length + small.length)
    expect(storage.body.quota_bytes).toBeGreaterThan(0)
    const twin = buildCommit({ branch: "b", files: { "big.bin": big, "small.txt": small } })
    expect((await a.post("/sam/chunky2/push", pushBody({ branch: "b", commits: [twin], blobs: [] }))).body.success).toBe(true)
    expect((await a.get("/sam/chunky2/size")).body.size_bytes).toBe(big.length + small.length)
    expect((await a.get("/orgs/sam/storage")).body.used_bytes - usedBefore).toBe(big.length + small.length)
  })

  it("answers commits/info and blobs/check with the protocol's limits", async () => {
    const a = await newRepo("info")
    const c = buildCommit({ branch: "i", files: { "x/y.txt": "y" } })
    await a.post("/sam/info/push", pushBody({ branch: "i", commits: [c] }))
    const info = await a.post("/sam/info/commits/info", { hashes: [c.commit.hash, "b".repeat(64)] })
    expect(info.body.commits.map((x: { hash: string }) => x.hash)).toEqual([c.commit.hash])
    expect(info.body.trees).toHaveLength(2)
    expect((await a.post("/sam/info/commits/info", { hashes: [c.commit.hash], metadata_only: true })).body.trees).toEqual([])
    expect((await a.post("/sam/info/commits/info", { hashes: [c.commit.hash, c.commit.hash] })).status).toBe(400)
    expect((await a.post("/sam/info/commits/info", { hashes: Array.from({ length: 257 }, (_, i) => Blake3.hash(String(i))) })).status).toBe(400)
    expect((await a.post("/sam/info/commits/info", { hashes: ["ABC"] })).status).toBe(400)
    const blobHash = [...c.contents.keys()][0]!
    expect((await a.post("/sam/info/blobs/check", { hashes: [blobHash, "c".repeat(64)] })).body).toEqual({ missing: ["c".repeat(64)] })
    expect(inlineBlobs(c)).toHaveLength(1)
    const caps = await api(server.url).get("/capabilities")
    expect(caps.status).toBe(200)
    // The complete staged set the Oak client looks for before it sends a large push (test/server/staged-push.test.ts).
    expect(caps.body).toMatchObject({
      push_protocol: "staged_v1",
      staged_capabilities_ready: true,
      staged_session_protocol: "opaque_v1",
      staged_abort_protocol: "v1",
      mapping_proof_protocol: "async_v1",
      chunk_batch_protocol: "bounded_v1"
    })
  })
})

describe("names and fields no checkout can use safely (issue 9, item 3)", () => {
  /** A push of one commit whose root tree holds one file named `name`, built by hand (the test builders refuse such names). */
  const pushNaming = (name: string, nested?: string) => {
    const bytes = new TextEncoder().encode("evil\n")
    const blobHash = Blake3.hash(bytes)
    const leaf: Array<Tree.TreeEntry> = [{ name: nested ?? name, kind: "blob", hash: blobHash, mode: "regular" }]
    const trees = [{ hash: Tree.hashTree(leaf), entries: leaf }]
    let root = trees[0]!
    if (nested !== undefined) {
      const top: Array<Tree.TreeEntry> = [{ name, kind: "tree", hash: root.hash, mode: "tree" }]
      root = { hash: Tree.hashTree(top), entries: top }
      trees.push(root)
    }
    const fields = {
      branch_name: "names",
      parent_hash: null,
      merge_parent_hash: null,
      manifest_hash: root.hash,
      author: "tester",
      message: null,
      timestamp: 1_790_000_000_000_000_000n
    }
    const path = nested === undefined ? name : `${name}/${nested}`
    return {
      expected_head: null,
      branch: { name: "names", description: null, parent_branch: "main", status: "open", created_at: "2026-11-22T10:00:00+00:00" },
      commits: [{
        hash: Commit.hashCommit(fields),
        branch_name: "names",
        parent_hash: null,
        manifest_hash: root.hash,
        author: "tester",
        timestamp: Timestamp.formatTimestamp(fields.timestamp),
        files: [{ path, change_type: "added", old_blob_hash: null, new_blob_hash: blobHash, new_mode: "regular" }]
      }],
      blobs: [{ hash: blobHash, content: Array.from(bytes), size: bytes.length }],
      trees
    }
  }

  const refused = async (path: string, body: unknown, code: string) => {
    const reply = await api(server.url, token).post(path, body)
    expect(reply.status, JSON.stringify(reply.body)).toBe(400)
    expect(isErrorBody(reply.body), JSON.stringify(reply.body)).toBe(true)
    expect(reply.body.code, JSON.stringify(reply.body)).toBe(code)
    return reply
  }

  it("refuses tree entry names with backslashes, .git in any spelling, dot names and names over 255 bytes", async () => {
    const a = await newRepo("names")
    for (
      const name of [
        "..\\..\\evil.bat",
        "C:\\Windows\\x.txt",
        "a\\b",
        ".GIT",
        ".Git",
        "git~1",
        ".git.",
        ".g\u200Cit",
        "x".repeat(256),
        "é".repeat(128)
      ]
    ) {
      await refused("/sam/names/push", pushNaming(name), "invalid_tree")
    }
    // Past the longest path the contract accepts (4096), refused at decoding.
    await refused("/sam/names/push", pushNaming("x".repeat(5000)), "invalid_request")
    // `.git` as a directory holding `config`, and `..` (the wire rule, in the contract: refused at decoding).
    await refused("/sam/names/push", pushNaming(".git", "config"), "invalid_tree")
    await refused("/sam/names/push", pushNaming("..", "x"), "invalid_request")
    expect((await a.get("/sam/names/branches/names")).status).toBe(404)
    // 255 bytes and look-alikes git allows are fine.
    const fine = await a.post("/sam/names/push", pushNaming("x".repeat(255)))
    expect(fine.body, JSON.stringify(fine.body)).toMatchObject({ success: true })
  })

  it("refuses in a push the branch names POST /branches refuses: one rule", async () => {
    const a = await newRepo("branchnames")
    // The contract's rule (Fields.NewBranchName), so the push body is refused at decoding.
    for (const name of ["a".repeat(256), "main ", " lead", "trail\u00a0", "HEAD", "head", "refs/heads/x", "refs/x", "-x", "a..b", "x.lock", "@{u}", "a b"]) {
      const c = buildCommit({ branch: name, files: { "a.txt": "a" } })
      await refused("/sam/branchnames/push", pushBody({ branch: name, commits: [c] }), "invalid_request")
      // Metadata-only pushes too.
      await refused("/sam/branchnames/push", pushBody({ branch: name, commits: [] }), "invalid_request")
      const created = await a.post("/sam/branchnames/branches", { name })
      expect(created.status, `POST /branches ${JSON.stringify(name)}`).toBe(400)
      expect(isErrorBody(created.body)).toBe(true)
    }
    for (const name of ["feature/x-y", "a".repeat(255), "headless", "refs", "my/refs/x"]) {
      const c = buildCommit({ branch: name, files: { "a.txt": "a" } })
      const pushed = await a.post("/sam/branchnames/push", pushBody({ branch: name, commits: [c] }))
      expect(pushed.body, name).toMatchObject({ success: true })
    }
  })

  it("sends the empty blob with no chunks (its shape in the Oak client), on pull and blobs/info", async () => {
    const a = await newRepo("empty-blob")
    const c = buildCommit({ branch: "e", files: { "empty.txt": "", "full.txt": "full\n" } })
    expect((await a.post("/sam/empty-blob/push", pushBody({ branch: "e", commits: [c] }))).body.success).toBe(true)
    const pull = await a.get("/sam/empty-blob/pull?branch_name=e")
    const empty = pull.body.blobs.find((b: { size: number }) => b.size === 0)
    expect(empty).toEqual({ hash: "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262", content: [], size: 0, chunks: [] })
    expect(pull.body.blobs.find((b: { size: number }) => b.size === 5).chunks).toHaveLength(1)
    const info = await a.post("/sam/empty-blob/blobs/info", { hashes: [empty.hash] })
    expect(info.body.blobs).toEqual([empty])
  })

  it("refuses an expected_head that is not 64 lowercase hex, and a depth that is not a plain integer", async () => {
    const a = await newRepo("fields")
    const c = buildCommit({ branch: "f", files: { "a.txt": "a" } })
    for (const expected of ["A".repeat(64), "a".repeat(63), "a".repeat(65), "", "main", ` ${"a".repeat(63)}`]) {
      await refused("/sam/fields/push", pushBody({ branch: "f", commits: [c], expectedHead: expected }), "invalid_request")
    }
    expect((await a.get("/sam/fields/branches/f")).status).toBe(404)
    expect((await a.post("/sam/fields/push", pushBody({ branch: "f", commits: [c] }))).body.success).toBe(true)

    for (const depth of ["1e3", "0x10", "%20", "-1", "1.5", "+1", "1%20", "Infinity"]) {
      const reply = await a.get(`/sam/fields/pull?branch_name=f&depth=${depth}`)
      expect(reply.status, depth).toBe(400)
      expect(isErrorBody(reply.body), depth).toBe(true)
    }
    for (const depth of ["", "0", "1", "1000"]) {
      expect((await a.get(`/sam/fields/pull?branch_name=f&depth=${depth}`)).status, depth).toBe(200)
    }
  })
})

describe("a .grove entry (the checkout's own state folder)", () => {
  const evil = '{"remote":"https://attacker.example/x"}\n'

  it("refuses a commit whose root holds .grove in any spelling a checkout takes for it, and stores nothing", async () => {
    const a = await newRepo("dotgrove")
    for (const name of [".grove", ".GROVE", ".Grove", "grove~1", ".grove.", ".grove ", "\u200C.grove", ".gr\u200Dove"]) {
      const c = buildCommit({ branch: "evil", files: { [`${name}/config.json`]: evil, "README.md": "hi\n" } })
      const reply = await a.post("/sam/dotgrove/push", pushBody({ branch: "evil", commits: [c] }))
      expect(reply.status, JSON.stringify(reply.body)).toBe(400)
      expect(reply.body.code, JSON.stringify(reply.body)).toBe("invalid_tree")
      expect(reply.body.error, JSON.stringify(reply.body)).toContain(JSON.stringify(name))
      // Nothing stored: no branch, no commit, no blob counts as uploaded.
      expect((await a.get("/sam/dotgrove/branches/evil")).status).toBe(404)
      expect((await a.post("/sam/dotgrove/commits/info", { hashes: [c.commit.hash] })).body.commits).toEqual([])
      const blobs = [...c.contents.keys()]
      expect(new Set((await a.post("/sam/dotgrove/blobs/check", { hashes: blobs })).body.missing)).toEqual(new Set(blobs))
    }
    // A file named .grove at the root too.
    const file = buildCommit({ branch: "evil", files: { ".grove": evil } })
    const asFile = await a.post("/sam/dotgrove/push", pushBody({ branch: "evil", commits: [file] }))
    expect([asFile.status, asFile.body.code]).toEqual([400, "invalid_tree"])
  })

  it("refuses one at any depth too, as git refuses .git (the client's walk skips it: a clone would lose it), and takes look-alikes", async () => {
    const a = await newRepo("deepgrove")
    const cases = [["d/.grove/x", ".grove"], ["D/.GROVE/x", ".GROVE"], ["a/b/grove~1/c", "grove~1"], ["d/.grove", ".grove"]] as const
    for (const [file, name] of cases) {
      const deep = buildCommit({ branch: "deep", files: { "README.md": "hi\n", [file]: "x\n" } })
      const reply = await a.post("/sam/deepgrove/push", pushBody({ branch: "deep", commits: [deep] }))
      expect([reply.status, reply.body.code], JSON.stringify(reply.body)).toEqual([400, "invalid_tree"])
      expect(reply.body.error).toContain(JSON.stringify(name))
      expect((await a.get("/sam/deepgrove/branches/deep")).status).toBe(404)
      const blobs = [...deep.contents.keys()]
      expect(new Set((await a.post("/sam/deepgrove/blobs/check", { hashes: blobs })).body.missing)).toEqual(new Set(blobs))
    }
    const alike = buildCommit({ branch: "alike", files: { "sub/.grovex/y": "y\n", ".grovex": "x\n", "grove": "g\n", "d/x.grove": "x\n" } })
    const fine = await a.post("/sam/deepgrove/push", pushBody({ branch: "alike", commits: [alike] }))
    expect(fine.body, JSON.stringify(fine.body)).toEqual({ success: true, new_head: alike.commit.hash, message: "ok" })
  })
})
