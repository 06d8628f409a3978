// The Oak client on a large repository against Grove. Pushes past its ordinary limits (128 new blobs, 64 MiB of blob
// bytes, 500 commits) need the staged_v1 protocol and async_v1 blob proofs: each is checked on the server (head, files
// byte for byte, history), and a push that fails mid-way is aborted and leaves the branch as it was. Clones run the
// integrity preflight (verified, pinned with --expected-head), download through binary chunk links, and honour a
// sparse cone; doctor and blob info read the same proof.
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as FastCdc from "@grove/core/chunking/FastCdc"
import * as Blake3 from "@grove/core/objects/Blake3"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { expectSameTree, expectServerHas, jsonOf, makeOak, noise, oakPath, ok, rawBytes, startProxy } from "../support/Oak.ts"

const OWNER = "stager"
const REPO = `${OWNER}/large`
const MiB = 1024 * 1024

let server: GroveServer
let key: string
let root: string
let home: string
let work: string
let branch: string
const client = makeOak({ home: () => home, key: () => key, author: OWNER })
const oak = client.run

const headOnServer = async () => (await api(server.url, key).get(`/${REPO}/branches/${branch}`)).body.head as string
const sha = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex")

/** The push's JSON result, after checking it went through the staged protocol and landed where the server says. */
const stagedPush = async (what: string) => {
  const run = ok(await oak(["push", "--json"], work), what)
  expect(run.stderr).toMatch(/POST \S+\/push\/staged-v1 \(0 commit\(s\), 0 blob\(s\), 0 tree\(s\)\)/)
  expect(run.stderr).not.toMatch(/POST \S+\/push \(/)
  const result = jsonOf(run)
  expect(result).toMatchObject({ pushed: true, published: true })
  expect(await headOnServer()).toBe(result.pushed_head)
  return { run, head: result.pushed_head as string }
}

describe.skipIf(oakPath === undefined)("the Oak client on a large repository against Grove", () => {
  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), "grove-oak-staged-"))
    home = path.join(root, "home")
    fs.mkdirSync(home)
    work = path.join(root, "w")
    server = await startServer()
    key = await server.createUser(OWNER)
    ok(await oak(["init", "w"], root), "oak init")
    fs.writeFileSync(path.join(work, "README.md"), "# large\n")
    ok(await oak(["commit"], work), "oak commit")
    const first = jsonOf(ok(await oak(["push", "-r", server.url, "--repo", REPO, "--json"], work), "oak push (first)"))
    branch = first.branch
  }, 120_000)

  afterAll(async () => {
    client.killAll()
    await server?.stop()
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true })
  })

  it("a later push of 200 new files goes in blob batches of 128, then trees, the commit and the finalizer", async () => {
    fs.mkdirSync(path.join(work, "many"))
    for (let i = 0; i < 200; i++) fs.writeFileSync(path.join(work, "many", `f${String(i).padStart(3, "0")}.txt`), `file ${i}\n`)
    ok(await oak(["commit"], work), "oak commit")
    const { run, head } = await stagedPush("oak push (200 files)")
    expect(run.stderr).toMatch(/staged-v1 \(0 commit\(s\), 128 blob\(s\), 0 tree\(s\)\)/)
    expect(run.stderr).toMatch(/staged-v1 \(0 commit\(s\), 72 blob\(s\), 0 tree\(s\)\)/)
    await expectServerHas(server.url, key, REPO, head, work)
  }, 120_000)

  it("a 25 MB file that a staged batch sends as one chunk is stored as FastCDC cuts it: its patched version uploads one chunk", async () => {
    // 150 new files and 25 MB: a staged push whose blob batch holds over 15 MiB inline, which the client spills to
    // chunks, the 25 MB file as ONE chunk of all its bytes (spill_inline_blobs_to_chunks), proven by async_v1.
    fs.mkdirSync(path.join(work, "spill"))
    for (let i = 0; i < 150; i++) fs.writeFileSync(path.join(work, "spill", `s${String(i).padStart(3, "0")}.txt`), `spilled ${i}\n`)
    const big = noise(25_000_000, 25)
    fs.writeFileSync(path.join(work, "spill", "big25.bin"), big)
    ok(await oak(["commit"], work), "oak commit")
    const first = await stagedPush("oak push (150 files and 25 MB)")
    expect(first.run.stderr).toMatch(/chunk \w+ \(25000000 B\)/)
    // The server keeps the blob under FastCDC's cuts of its bytes, as a client that chunks it would send them.
    const hash = Blake3.hash(big)
    const info = await api(server.url, key).post(`/${REPO}/blobs/info`, { hashes: [hash] })
    expect(info.status).toBe(200)
    expect(info.body.blobs[0].chunks.map((c: { offset: number; size: number }) => ({ offset: c.offset, length: c.size })))
      .toEqual(FastCdc.boundaries(big))
    expect(sha((await rawBytes(server.url, key, REPO, first.head, "spill/big25.bin")).bytes)).toBe(sha(big))

    // A 20-byte patch in the middle: one new chunk. Before, the server had only the one 25 MB chunk: 20 of 21 went up.
    big.write("patched in the middle", 12_000_000)
    fs.writeFileSync(path.join(work, "spill", "big25.bin"), big)
    ok(await oak(["commit"], work), "oak commit")
    const second = ok(await oak(["push", "--json"], work), "oak push (patched)")
    expect(Number(/chunks\/check \((\d+) hashes\)/.exec(second.stderr)?.[1])).toBeGreaterThan(10)
    expect(Number(/uploading (\d+) large chunk\(s\)/.exec(second.stderr)?.[1])).toBe(1)
    const head = jsonOf(second).pushed_head as string
    expect(await headOnServer()).toBe(head)
    expect(sha((await rawBytes(server.url, key, REPO, head, "spill/big25.bin")).bytes)).toBe(sha(big))
  }, 180_000)

  it("a later push of a 72 MiB file proves its chunk list (async_v1) and names it by the proof", async () => {
    const big = noise(72 * MiB, 72)
    fs.writeFileSync(path.join(work, "big72.bin"), big)
    ok(await oak(["commit"], work), "oak commit")
    const { run, head } = await stagedPush("oak push (72 MiB)")
    expect(run.stderr).toMatch(/staged-v1 \(0 commit\(s\), 1 blob\(s\), 0 tree\(s\)\)/)
    const raw = await rawBytes(server.url, key, REPO, head, "big72.bin")
    expect(raw.status).toBe(200)
    expect(sha(raw.bytes)).toBe(sha(big))
  }, 180_000)

  it("a one-byte edit of a 100 MiB file uploads one chunk and lands through the staged protocol", async () => {
    const big = noise(100 * MiB, 100)
    fs.writeFileSync(path.join(work, "big100.bin"), big)
    ok(await oak(["commit"], work), "oak commit")
    await stagedPush("oak push (100 MiB)")
    big[50_000_000] = big[50_000_000]! ^ 0xff
    fs.writeFileSync(path.join(work, "big100.bin"), big)
    ok(await oak(["commit"], work), "oak commit")
    const { run, head } = await stagedPush("oak push (one-byte edit)")
    // Every chunk but the edited one is on the server already.
    const checked = [...run.stderr.matchAll(/chunks\/check \((\d+) hashes\)/g)].reduce((n, m) => n + Number(m[1]), 0)
    expect(checked).toBeGreaterThan(1)
    expect(run.stderr).toMatch(/uploading 1 large chunk\(s\)|1 chunk\(s\) to upload|uploaded 1/i)
    const raw = await rawBytes(server.url, key, REPO, head, "big100.bin")
    expect(sha(raw.bytes)).toBe(sha(big))
  }, 180_000)

  it("a later push of 510 commits goes in commit batches of 500 and 10; the server has the whole history", async () => {
    const before = await headOnServer()
    for (let i = 0; i < 510; i++) {
      fs.writeFileSync(path.join(work, "counter.txt"), `commit ${i}\n`)
      ok(await oak(["commit"], work), `oak commit ${i}`)
    }
    const { run, head } = await stagedPush("oak push (510 commits)")
    expect(run.stderr).toMatch(/staged-v1 \(500 commit\(s\), 0 blob\(s\), 0 tree\(s\)\)/)
    expect(run.stderr).toMatch(/staged-v1 \(10 commit\(s\), 0 blob\(s\), 0 tree\(s\)\)/)
    const pull = await api(server.url, key).get(`/${REPO}/pull?branch_name=${branch}&since=${before}`)
    expect(pull.body.head).toBe(head)
    expect(pull.body.commits).toHaveLength(510)
    const raw = await rawBytes(server.url, key, REPO, head, "counter.txt")
    expect(raw.bytes.toString()).toBe("commit 509\n")
  }, 300_000)

  it("a clone is verified by the integrity preflight, keeps its key, downloads through binary links; a sparse clone gets the cone only", async () => {
    const full = path.join(root, "clone-full")
    const clone = ok(await oak(["clone", "-r", server.url, REPO, full, "--branch", branch], root), "oak clone")
    expect(clone.stderr + clone.stdout).not.toMatch(/credential was not accepted|legacy_unverified/)
    expect(clone.stderr).toMatch(/downloading \d+ chunk\(s\) \(0 inline\), concurrency=\d+, batch_endpoint=true/)
    expectSameTree(full, work)
    // The key the clone was made with is kept in the checkout.
    expect(fs.readFileSync(path.join(full, ".oak", "oak.db")).includes(Buffer.from(key))).toBe(true)

    const sparse = path.join(root, "clone-sparse")
    const partial = ok(await oak(["clone", "-r", server.url, REPO, sparse, "--branch", branch, "--path", "many"], root), "oak clone --path")
    expect(Number(/downloading (\d+) chunk\(s\)/.exec(partial.stderr)?.[1])).toBe(200)
    expect(fs.existsSync(path.join(sparse, "big100.bin"))).toBe(false)
    expect(fs.readFileSync(path.join(sparse, "many", "f007.txt"), "utf8")).toBe("file 7\n")
  }, 180_000)

  it("clone --expected-head pins the branch's exact head (412 on any other); doctor and blob info prove the content", async () => {
    const head = await headOnServer()
    ok(await oak(["clone", "-r", server.url, REPO, path.join(root, "clone-pinned"), "--branch", branch, "--expected-head", head], root), "oak clone --expected-head")
    const wrong = await oak(["clone", "-r", server.url, REPO, path.join(root, "clone-wrong"), "--branch", branch, "--expected-head", "0".repeat(64)], root)
    expect(wrong.code).not.toBe(0)
    expect(wrong.stderr).toContain("412")
    expect(fs.existsSync(path.join(root, "clone-wrong"))).toBe(false)

    for (const verify of ["metadata", "existence"]) {
      const doctor = jsonOf(ok(await oak(["doctor", "--repo", REPO, "-r", server.url, "--verify", verify, "--json"], root), `oak doctor --verify ${verify}`))
      expect(doctor).toMatchObject({ outcome: "verified", status: "healthy", healthy: true, verification: verify })
      expect(doctor.scope.commit_count).toBeGreaterThan(510)
      expect(doctor.scope.chunk_count).toBeGreaterThan(10)
    }
    const big = noise(72 * MiB, 72)
    const hash = (await api(server.url, key).get(`/${REPO}/pull?branch_name=${branch}&depth=1`)).body.blobs
      .find((b: { size: number }) => b.size === big.length).hash as string
    const info = jsonOf(ok(await oak(["blob", "info", "--repo", REPO, "-r", server.url, hash, "--json"], root), "oak blob info"))
    expect(info.status).toBe("healthy")
    expect(info.scope.verified_byte_count).toBe(big.length)
    expect(info.blob_evidence[0]).toMatchObject({ hash, metadata_present: true, affected: expect.arrayContaining([expect.objectContaining({ path: "big72.bin" })]) })
    expect(info.blob_evidence[0].chunks.every((c: { hash_verified: boolean }) => c.hash_verified)).toBe(true)
  }, 180_000)

  it("a push that fails mid-way aborts its stage: the branch is unchanged and the stage takes nothing more", async () => {
    const before = await headOnServer()
    fs.mkdirSync(path.join(work, "aborted"))
    for (let i = 0; i < 150; i++) fs.writeFileSync(path.join(work, "aborted", `a${i}.txt`), `aborted ${i}\n`)
    ok(await oak(["commit"], work), "oak commit")
    // The proxy refuses the first batch that carries commits (after the blob and tree batches were staged).
    let staged: Record<string, unknown> | undefined
    let aborts = 0
    const proxy = await startProxy(server.url, (request) => {
      if (request.method === "POST" && request.url.endsWith("/push/staged-v1")) {
        const body = JSON.parse(request.body.toString()) as { commits: Array<unknown> }
        if (body.commits.length > 0) return { status: 400, body: { error: "refused by the test proxy" } }
        staged = body
      }
      if (request.method === "POST" && /\/push\/staged-v1\/[^/]+\/abort$/.test(request.url)) aborts++
      return undefined
    })
    try {
      const failed = await oak(["push", "-r", proxy.url, "--json"], work)
      expect(failed.code, failed.stderr).not.toBe(0)
      expect(failed.stderr).toMatch(/staged-v1 \(0 commit\(s\), 128 blob\(s\)/)
    } finally {
      await proxy.close()
    }
    expect(aborts).toBe(1)
    expect(await headOnServer()).toBe(before)
    // The aborted stage refuses a batch it took before, sent again straight to the server.
    const replay = await api(server.url, key).post(`/${REPO}/push/staged-v1`, staged)
    expect(replay.status).toBe(409)
    expect(replay.body.code).toBe("stage_aborted")
    // The same push straight to the server then lands. The aborted stage's blobs were verified and count as this
    // caller's uploads, so the client finds fewer than 128 missing and sends an ordinary push.
    const again = jsonOf(ok(await oak(["push", "-r", server.url, "--json"], work), "oak push (after the abort)"))
    expect(await headOnServer()).toBe(again.pushed_head)
    await expectServerHas(server.url, key, REPO, again.pushed_head, work)
  }, 180_000)
})
