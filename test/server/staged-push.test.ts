/**
 * Staged pushes (`push/staged-v1`) and blob mapping proofs (`blobs/proofs/*`) against the real
 * server, the way the Oak client sends them: blobs, then trees, then commits in batches, then the
 * finalizer; large blobs proven first. Checks what each step publishes (nothing before the
 * finalizer), every refusal's status and code, aborts, and that a stage is its caller's alone.
 */
import * as Blake3 from "@grove/core/objects/Blake3"
import { mappingDigest } from "@grove/core/objects/MappingDigest"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type Built, buildCommit, chunkRefs, inlineBlobs, noise } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let sam: string
let tina: string

beforeAll(async () => {
  server = await startServer()
  sam = await server.createUser("sam")
  tina = await server.createUser("tina")
  expect((await as(sam).post("/repos", { name: "staged" })).status).toBe(201)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const REPO = "/sam/staged"

/**
 * Every request of this file on a connection of its own (`connection: close`: undici pools no socket after it). A
 * pooled keep-alive socket fails the next request sent on it when the server's event loop was held past its 5 s
 * keep-alive timeout (seconds at load 20): the timer runs before the request already waiting on the socket is read,
 * and the server closes it under that request ("other side closed" in prove()'s back-to-back PUTs).
 */
const FRESH = { connection: "close" } as const
const as = (key: string) => {
  const { raw } = api(server.url, key)
  return {
    get: (path: string) => raw("GET", path, undefined, FRESH),
    post: (path: string, body?: unknown) => raw("POST", path, body ?? {}, FRESH),
    put: (path: string, body: unknown) => raw("PUT", path, body, FRESH)
  }
}
const fetchFresh = (url: string, init: { method?: string; headers: Record<string, string>; body?: Uint8Array }) =>
  fetch(url, { ...init, headers: { ...init.headers, ...FRESH } })

const branchOf = (name: string) => ({ name, description: "staged", parent_branch: "main", status: "open", created_at: "2026-11-25T10:00:00+00:00" })

let stageCounter = 0
const newStageId = () => `stage-${Date.now().toString(36)}-${String(++stageCounter).padStart(4, "0")}`

const batch = (stageId: string, branch: string, objects: { commits?: Array<Built["commit"]>; trees?: Built["trees"]; blobs?: Array<unknown> }, expected: string | null = null) => ({
  stage_id: stageId,
  expected_branch_head: expected,
  branch: branchOf(branch),
  finalize: false,
  commits: objects.commits ?? [],
  blobs: objects.blobs ?? [],
  trees: objects.trees ?? []
})

const finalizer = (stageId: string, branch: string, target: string, expected: string | null = null) => ({
  stage_id: stageId,
  expected_branch_head: expected,
  branch: branchOf(branch),
  finalize: true,
  target_head: target,
  commits: [],
  blobs: [],
  trees: []
})

const stage = (body: unknown, key = sam) => as(key).post(`${REPO}/push/staged-v1`, body)

/** Proves a chunked blob the way the client does; answers the proof's final body. */
const prove = async (hash: string, refs: ReturnType<typeof chunkRefs>, upload: boolean) => {
  const chunks = refs.map((r) => ({ hash: r.hash, offset: r.offset, size: r.size }))
  const size = refs.reduce((n, r) => n + r.size, 0)
  const created = await as(sam).post(`${REPO}/blobs/proofs/async-v1`, {
    blobs: [{ hash, size, mapping_digest: mappingDigest(chunks), total_chunks: chunks.length }]
  })
  expect(created.status).toBe(202)
  expect(created.body.mapping_proof_job).toMatchObject({ status: "uploading" })
  const token = created.body.mapping_proof_job.token as string
  const pages = await as(sam).put(`${REPO}/blobs/proofs/${token}/mappings`, { pages: [{ blob_index: 0, first_chunk_index: 0, chunks }] })
  expect(pages.status).toBe(200)
  expect(pages.body).toEqual({ accepted_chunks: chunks.length, complete_blobs: [0], all_mappings_complete: true })
  if (upload) {
    for (const r of refs) {
      const put = await fetchFresh(`${server.url}/api${REPO}/chunks/${r.hash}`, { method: "PUT", headers: { authorization: `Bearer ${sam}` }, body: r.data.slice() })
      expect(put.status).toBe(200)
    }
  }
  let reply = await as(sam).post(`${REPO}/blobs/proofs/${token}/finalize`, {})
  for (let i = 0; reply.status === 202 && i < 100; i++) {
    await new Promise((resolve) => setTimeout(resolve, reply.body.mapping_proof_job.retry_after_ms))
    reply = await as(sam).get(`${REPO}/blobs/proofs/${token}`)
  }
  expect(reply.status).toBe(200)
  return { token, body: reply.body, chunks, size }
}

describe("staged pushes", () => {
  it("publishes nothing until the finalizer, which moves the branch in one step; a replayed finalizer gets the same answer", async () => {
    const first = buildCommit({ branch: "feat", files: { "a.txt": "one\n", "dir/b.txt": "two\n" } })
    const second = buildCommit({ branch: "feat", parent: first, files: { "a.txt": "one, again\n", "dir/b.txt": "two\n" } })
    const id = newStageId()
    const blobs = [...inlineBlobs(first), ...inlineBlobs(second, new Set([...second.contents.keys()].filter((h) => !first.contents.has(h))))]
    expect((await stage(batch(id, "feat", { blobs }))).body).toEqual({ success: true, new_head: null, message: "staged" })
    const trees = [...new Map([...first.trees, ...second.trees].map((t) => [t.hash, t])).values()]
    expect((await stage(batch(id, "feat", { trees }))).body).toMatchObject({ success: true })
    expect((await stage(batch(id, "feat", { commits: [first.commit] }))).body).toMatchObject({ success: true })
    expect((await stage(batch(id, "feat", { commits: [second.commit] }))).body).toMatchObject({ success: true })

    // Nothing is visible yet: no branch, and the repository does not reach the blobs.
    expect((await as(sam).get(`${REPO}/branches/feat`)).status).toBe(404)
    const info = await as(sam).post(`${REPO}/blobs/info`, { hashes: [...first.contents.keys()] })
    expect(info.body.blobs).toEqual([])
    expect((await as(sam).get(`${REPO}/raw/${first.commit.hash}/a.txt`)).status).toBe(404)

    const done = await stage(finalizer(id, "feat", second.commit.hash))
    expect(done.body).toEqual({ success: true, new_head: second.commit.hash, message: "ok" })
    const branch = await as(sam).get(`${REPO}/branches/feat`)
    expect(branch.body).toMatchObject({ head: second.commit.hash, description: "staged", status: "open" })
    const pull = await as(sam).get(`${REPO}/pull?branch_name=feat`)
    expect(pull.body.commits.map((c: { hash: string }) => c.hash)).toEqual([first.commit.hash, second.commit.hash])
    const raw = await fetchFresh(`${server.url}/api${REPO}/raw/${second.commit.hash}/a.txt`, { headers: { authorization: `Bearer ${sam}` } })
    expect(await raw.text()).toBe("one, again\n")

    expect((await stage(finalizer(id, "feat", second.commit.hash))).body).toEqual({ success: true, new_head: second.commit.hash, message: "already finalized" })
    const other = await stage(finalizer(id, "feat", first.commit.hash))
    expect(other.status).toBe(400)
    expect(other.body.code).toBe("stage_completed")
    const late = await stage(batch(id, "feat", { trees }))
    expect(late.status).toBe(400)
    expect(late.body.code).toBe("stage_completed")
  })

  it("a later push from the branch's head; a moved head answers success: false; boundaries and targets are checked", async () => {
    const base = (await as(sam).get(`${REPO}/branches/feat`)).body.head as string
    const baseFiles = { "a.txt": "one, again\n", "dir/b.txt": "two\n" }
    const next = buildCommit({ branch: "feat", parentHash: base, parentSnapshot: buildCommit({ branch: "x", files: baseFiles }).snapshot, files: { ...baseFiles, "c.txt": "three\n" } })
    const id = newStageId()
    // Stale: the client thinks the branch is empty.
    expect((await stage(batch(id, "feat", { blobs: inlineBlobs(next) }))).body).toEqual({ success: false, new_head: base, message: "Conflict: staged session boundary changed" })
    expect((await stage(batch(id, "feat", { blobs: inlineBlobs(next), trees: next.trees, commits: [next.commit] }, base))).body).toMatchObject({ success: true })
    // The same stage id with another boundary, another branch record, or a finalizer carrying objects.
    const other = await stage({ ...batch(id, "feat", {}, base), force: true })
    expect([other.status, other.body.code]).toEqual([400, "stage_mismatch"])
    const renamed = await stage({ ...batch(id, "feat", {}, base), branch: { ...branchOf("feat"), description: "changed" } })
    expect([renamed.status, renamed.body.code]).toEqual([400, "stage_mismatch"])
    const carrying = await stage({ ...finalizer(id, "feat", next.commit.hash, base), trees: next.trees })
    expect([carrying.status, carrying.body.code]).toEqual([400, "invalid_push"])
    const outside = await stage(finalizer(id, "feat", base, base))
    expect([outside.status, outside.body.code]).toEqual([400, "target_not_staged"])
    const missing = await stage(finalizer(newStageId(), "feat", next.commit.hash, base))
    expect([missing.status, missing.body.code]).toEqual([400, "stage_missing"])
    const targetInBatch = await stage({ ...batch(id, "feat", {}, base), target_head: next.commit.hash })
    expect([targetInBatch.status, targetInBatch.body.code]).toEqual([400, "invalid_push"])
    // Someone else cannot see the stage (nor the private repository).
    expect((await stage(finalizer(id, "feat", next.commit.hash, base), tina)).status).toBe(404)
    expect((await stage(finalizer(id, "feat", next.commit.hash, base))).body).toEqual({ success: true, new_head: next.commit.hash, message: "ok" })
  })

  it("checks every batch like a push: hashes, parents, missing trees; main is refused; ids are validated", async () => {
    const lone = buildCommit({ branch: "feat2", parentHash: "9".repeat(64), files: { "x.txt": "x\n" } })
    const id = newStageId()
    const orphan = await stage(batch(id, "feat2", { blobs: inlineBlobs(lone), trees: lone.trees, commits: [lone.commit] }))
    expect([orphan.status, orphan.body.code]).toEqual([400, "missing_parent"])
    const noTrees = buildCommit({ branch: "feat2", files: { "y.txt": "y\n" } })
    const missingTree = await stage(batch(id, "feat2", { blobs: inlineBlobs(noTrees), commits: [noTrees.commit] }))
    expect([missingTree.status, missingTree.body.code]).toEqual([400, "missing_tree"])
    const lying = await stage(batch(id, "feat2", { blobs: [{ hash: "1".repeat(64), content: [1, 2, 3], size: 3 }] }))
    expect([lying.status, lying.body.code]).toEqual([400, "invalid_blob"])
    const main = await stage(batch(newStageId(), "main", {}))
    expect([main.status, main.body.code]).toEqual([403, "main_protected"])
    const shortId = await stage(batch("short", "feat2", {}))
    expect([shortId.status, shortId.body.code]).toEqual([400, "invalid_request"])
    const badHead = await stage(batch(newStageId(), "feat2", {}, "HEAD"))
    expect([badHead.status, badHead.body.code]).toEqual([400, "invalid_request"])
    for (const reply of [orphan, missingTree, lying, main, shortId, badHead]) expect(isErrorBody(reply.body)).toBe(true)
  })

  it("refuses a commit whose root holds .grove (the checkout's own folder), in one batch or with its trees before, and a deeper one", async () => {
    const evil = '{"remote":"https://attacker.example/x"}\n'
    const whole = buildCommit({ branch: "dotgrove", files: { ".GROVE/config.json": evil } })
    const id = newStageId()
    const one = await stage(batch(id, "dotgrove", { blobs: inlineBlobs(whole), trees: whole.trees, commits: [whole.commit] }))
    expect([one.status, one.body.code], JSON.stringify(one.body)).toEqual([400, "invalid_tree"])
    expect(one.body.error).toContain('".GROVE"')
    // Its trees in an earlier batch, or a deeper one (as git refuses .git at any depth): the batch carrying the tree
    // is refused, before any commit.
    const later = buildCommit({ branch: "dotgrove", files: { "grove~1/config.json": evil } })
    const deep = buildCommit({ branch: "dotgrove", files: { "docs/.grove/config.json": evil } })
    for (const [built, name] of [[later, "grove~1"], [deep, ".grove"]] as const) {
      const trees = await stage(batch(id, "dotgrove", { blobs: inlineBlobs(built), trees: built.trees }))
      expect([trees.status, trees.body.code], JSON.stringify(trees.body)).toEqual([400, "invalid_tree"])
      expect(trees.body.error).toContain(JSON.stringify(name))
    }
    const final = await stage(finalizer(id, "dotgrove", later.commit.hash))
    expect(final.status, JSON.stringify(final.body)).toBe(400)
    expect((await as(sam).get(`${REPO}/branches/dotgrove`)).status).toBe(404)
  })

  it("an aborted stage leaves nothing published and takes no more batches; aborts are idempotent", async () => {
    const c = buildCommit({ branch: "gone", files: { "g.txt": "gone\n" } })
    const id = newStageId()
    expect((await stage(batch(id, "gone", { blobs: inlineBlobs(c), trees: c.trees, commits: [c.commit] }))).body.success).toBe(true)
    const wrong = await as(sam).post(`${REPO}/push/staged-v1/${id}/abort`, { branch_name: "other", expected_branch_head: null })
    expect([wrong.status, wrong.body.code]).toEqual([400, "stage_mismatch"])
    const aborted = await as(sam).post(`${REPO}/push/staged-v1/${id}/abort`, { branch_name: "gone", expected_branch_head: null })
    expect(aborted.body).toEqual({ aborted: true, state: "aborted" })
    expect((await as(sam).post(`${REPO}/push/staged-v1/${id}/abort`, { branch_name: "gone", expected_branch_head: null })).body).toEqual({ aborted: true, state: "aborted" })
    const after = await stage(finalizer(id, "gone", c.commit.hash))
    expect([after.status, after.body.code]).toEqual([409, "stage_aborted"])
    expect((await as(sam).get(`${REPO}/branches/gone`)).status).toBe(404)
    expect((await as(sam).post(`${REPO}/push/staged-v1/${newStageId()}/abort`, { branch_name: "gone", expected_branch_head: null })).body).toEqual({ aborted: false, state: "missing" })
    // A completed stage cannot be aborted.
    const done = buildCommit({ branch: "kept", files: { "k.txt": "kept\n" } })
    const keptId = newStageId()
    await stage(batch(keptId, "kept", { blobs: inlineBlobs(done), trees: done.trees, commits: [done.commit] }))
    expect((await stage(finalizer(keptId, "kept", done.commit.hash))).body.success).toBe(true)
    const late = await as(sam).post(`${REPO}/push/staged-v1/${keptId}/abort`, { branch_name: "kept", expected_branch_head: null })
    expect([late.status, late.body.code]).toEqual([409, "stage_completed"])
  })

  it("a caller has at most 8 stages open in a repository (429), and an abort frees a place", async () => {
    const ids: Array<string> = []
    let refused: { status: number; body: any } | undefined
    for (let i = 0; i < 10 && refused === undefined; i++) {
      const id = newStageId()
      const reply = await stage(batch(id, `many-${i}`, {}))
      if (reply.status === 429) refused = reply
      else {
        expect(reply.body.success).toBe(true)
        ids.push(id)
      }
    }
    expect(refused?.body.code).toBe("too_many_stages")
    for (const [i, id] of ids.entries()) {
      expect((await as(sam).post(`${REPO}/push/staged-v1/${id}/abort`, { branch_name: `many-${i}`, expected_branch_head: null })).body.aborted).toBe(true)
    }
    expect((await stage(batch(newStageId(), "many-x", {}))).body.success).toBe(true)
  })
})

describe("open stages: per caller, and the admins' view (issue 20 item 5)", () => {
  // Organization crew: sam owns it, ada administers it, tina is a member; crew/shared is private.
  const SHARED = "/crew/shared"
  let ada: string
  const stageIn = (key: string, id: string, branch: string) => as(key).post(`${SHARED}/push/staged-v1`, batch(id, branch, {}))
  const abortIn = (key: string, id: string, branch: string) =>
    as(key).post(`${SHARED}/push/staged-v1/${id}/abort`, { branch_name: branch, expected_branch_head: null })
  const listed = async (key: string) => {
    const reply = await as(key).get(`${SHARED}/push/staged-v1`)
    expect(reply.status, JSON.stringify(reply.body)).toBe(200)
    return reply.body.stages as Array<{ stage_id: string; caller: string; branch: string; expected_branch_head: string | null; commit_count: number }>
  }
  const tinas: Array<string> = []

  beforeAll(async () => {
    ada = await server.createUser("ada")
    expect((await as(sam).post("/orgs", { slug: "crew", name: "Crew" })).status).toBe(201)
    expect((await as(sam).post("/orgs/crew/members", { username: "ada", role: "admin" })).status).toBe(201)
    expect((await as(sam).post("/orgs/crew/members", { username: "tina" })).status).toBe(201)
    expect((await as(sam).post("/repos", { name: "shared", organization_slug: "crew" })).status).toBe(201)
  }, 60_000)

  it("one member's eight open stages do not lock the others out", async () => {
    for (let i = 0; i < 8; i++) {
      const id = newStageId()
      const reply = await stageIn(tina, id, `tina-${i}`)
      expect(reply.body, JSON.stringify(reply.body)).toMatchObject({ success: true })
      tinas.push(id)
    }
    const ninth = await stageIn(tina, newStageId(), "tina-9")
    expect([ninth.status, ninth.body.code]).toEqual([429, "too_many_stages"])
    // The owner and an admin still push.
    expect((await stageIn(sam, "sam-stage-0000000001", "sam-0")).body).toMatchObject({ success: true })
    expect((await stageIn(ada, "ada-stage-0000000001", "ada-0")).body).toMatchObject({ success: true })
  })

  it("a member lists and aborts only their own stages; the repository's admins and owner list and abort any, audited", async () => {
    const own = await listed(tina)
    expect(own.map((s) => s.stage_id).sort()).toEqual([...tinas].sort())
    expect(own[0]).toMatchObject({ caller: "tina", expected_branch_head: null, commit_count: 0 })
    for (const key of [sam, ada]) {
      const all = await listed(key)
      expect(all.map((s) => s.stage_id).sort()).toEqual([...tinas, "ada-stage-0000000001", "sam-stage-0000000001"].sort())
      expect(new Set(all.map((s) => s.caller))).toEqual(new Set(["tina", "sam", "ada"]))
    }
    // Paged like every list.
    const first = await as(sam).get(`${SHARED}/push/staged-v1?limit=4`)
    expect(first.body.stages).toHaveLength(4)
    const second = await as(sam).get(`${SHARED}/push/staged-v1?limit=20&cursor=${first.headers.get("x-next-cursor")}`)
    expect([...first.body.stages, ...second.body.stages].map((s: { stage_id: string }) => s.stage_id)).toEqual((await listed(sam)).map((s) => s.stage_id))
    // Someone else's stage is missing to a member; a stranger does not see the repository.
    expect((await abortIn(tina, "sam-stage-0000000001", "sam-0")).body).toEqual({ aborted: false, state: "missing" })
    expect((await as(await server.createUser("stray")).get(`${SHARED}/push/staged-v1`)).status).toBe(404)
    // The admin and the owner abort the member's stages with the boundary the listing shows.
    const [a, b] = own
    expect((await abortIn(ada, a!.stage_id, a!.branch)).body).toEqual({ aborted: true, state: "aborted" })
    expect((await abortIn(sam, b!.stage_id, b!.branch)).body).toEqual({ aborted: true, state: "aborted" })
    expect((await listed(tina)).map((s) => s.stage_id)).not.toContain(a!.stage_id)
    // The member has room again.
    expect((await stageIn(tina, newStageId(), "tina-again")).body).toMatchObject({ success: true })
    const audit = await as(sam).get("/orgs/crew/audit?action=push.stage.abort")
    expect(audit.status).toBe(200)
    const entries = audit.body.entries as Array<{ actor: string; target: string; details: Record<string, unknown> }>
    expect(entries.map((e) => [e.actor, e.target, e.details.stage_id]).sort()).toEqual([["ada", "crew/shared", a!.stage_id], ["sam", "crew/shared", b!.stage_id]].sort())
    // A member's abort of their own stage is no admin action: not audited.
    const mine = (await listed(tina))[0]!
    expect((await abortIn(tina, mine.stage_id, mine.branch)).body.aborted).toBe(true)
    expect((await as(sam).get("/orgs/crew/audit?action=push.stage.abort")).body.entries).toHaveLength(2)
  })
})

describe("blob mapping proofs", () => {
  // 11 MiB: above the chunking threshold.
  const bytes = new Uint8Array(noise(11 * 1024 * 1024, 11))
  const hash = Blake3.hash(bytes)
  const refs = chunkRefs(bytes)

  it("a blob whose chunks are not uploaded is missing; once they are, the proof verifies it and a batch may name it", async () => {
    expect(refs.length).toBeGreaterThan(1)
    const before = await prove(hash, refs, false)
    expect(before.body).toEqual({ verified: [], missing: [hash] })
    const proven = await prove(hash, refs, true)
    expect(proven.body).toEqual({ verified: [hash], missing: [], proof_token: proven.token })

    const c = buildCommit({ branch: "large", files: { "big.bin": bytes, "small.txt": "small\n" } })
    const id = newStageId()
    const small = inlineBlobs(c).filter((b) => b.hash !== hash)
    const blob = { hash, content: [], size: proven.size, chunks: proven.chunks, mapping_proof_token: proven.token }
    // Without the token, with a token of another chunk list, or a token on an inline blob: refused.
    const bare = await stage(batch(id, "large", { blobs: [{ ...blob, mapping_proof_token: null }] }))
    expect([bare.status, bare.body.code]).toEqual([400, "missing_proof"])
    const shifted = proven.chunks.map((ch, i) => i === 0 ? { ...ch, hash: "2".repeat(64) } : ch)
    const mismatch = await stage(batch(id, "large", { blobs: [{ ...blob, chunks: shifted }] }))
    expect([mismatch.status, mismatch.body.code]).toEqual([409, "proof_mismatch"])
    const inline = await stage(batch(id, "large", { blobs: [{ ...small[0]!, mapping_proof_token: proven.token }] }))
    expect([inline.status, inline.body.code]).toEqual([400, "invalid_blob"])

    expect((await stage(batch(id, "large", { blobs: [blob, ...small] }))).body.success).toBe(true)
    expect((await stage(batch(id, "large", { trees: c.trees }))).body.success).toBe(true)
    expect((await stage(batch(id, "large", { commits: [c.commit] }))).body.success).toBe(true)
    expect((await stage(finalizer(id, "large", c.commit.hash))).body.success).toBe(true)
    const raw = await fetchFresh(`${server.url}/api${REPO}/raw/${c.commit.hash}/big.bin`, { headers: { authorization: `Bearer ${sam}` } })
    expect(Buffer.from(await raw.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true)
    // blobs/check: the strict receipt predicate is acknowledged, and verify_content re-hashes.
    const check = await as(sam).post(`${REPO}/blobs/check`, { hashes: [hash, "3".repeat(64)], require_verified_receipts: true, verify_content: true })
    expect(check.body).toEqual({ missing: ["3".repeat(64)], verified_content: true, verified_receipts_required: true })
  })

  it("refuses malformed sets, pages and lists that do not match their digest; tokens are their caller's", async () => {
    const empty = await as(sam).post(`${REPO}/blobs/proofs/async-v1`, { blobs: [] })
    // The schema says 1-128 blobs; the server checks what it cannot say (distinct hashes, totals).
    expect([empty.status, empty.body.code]).toEqual([400, "invalid_request"])
    const twice = { hash: "4".repeat(64), size: 5, mapping_digest: "5".repeat(64), total_chunks: 1 }
    const dup = await as(sam).post(`${REPO}/blobs/proofs/async-v1`, { blobs: [twice, twice] })
    expect([dup.status, dup.body.code]).toEqual([400, "invalid_proof"])

    const chunks = refs.map((r) => ({ hash: r.hash, offset: r.offset, size: r.size }))
    const wrongDigest = await as(sam).post(`${REPO}/blobs/proofs/async-v1`, {
      blobs: [{ hash, size: bytes.length, mapping_digest: "6".repeat(64), total_chunks: chunks.length }]
    })
    const token = wrongDigest.body.mapping_proof_job.token as string
    expect((await as(tina).get(`${REPO}/blobs/proofs/${token}`)).status).toBe(404)
    const past = await as(sam).put(`${REPO}/blobs/proofs/${token}/mappings`, { pages: [{ blob_index: 0, first_chunk_index: 1, chunks }] })
    expect([past.status, past.body.code]).toEqual([400, "invalid_page"])
    const badIndex = await as(sam).put(`${REPO}/blobs/proofs/${token}/mappings`, { pages: [{ blob_index: 3, first_chunk_index: 0, chunks }] })
    expect([badIndex.status, badIndex.body.code]).toEqual([400, "invalid_page"])
    const partial = await as(sam).put(`${REPO}/blobs/proofs/${token}/mappings`, { pages: [{ blob_index: 0, first_chunk_index: 0, chunks: chunks.slice(0, 1) }] })
    expect(partial.body).toEqual({ accepted_chunks: 1, complete_blobs: [], all_mappings_complete: false })
    const incomplete = await as(sam).post(`${REPO}/blobs/proofs/${token}/finalize`, {})
    expect([incomplete.status, incomplete.body.code]).toEqual([409, "mapping_incomplete"])
    await as(sam).put(`${REPO}/blobs/proofs/${token}/mappings`, { pages: [{ blob_index: 0, first_chunk_index: 0, chunks }] })
    const digest = await as(sam).post(`${REPO}/blobs/proofs/${token}/finalize`, {})
    expect([digest.status, digest.body.code]).toEqual([409, "mapping_incomplete"])
    expect(digest.body.error).toContain("mapping digest")
    expect((await as(sam).get(`${REPO}/blobs/proofs/0123456789abcdef0123456789abcdef`)).status).toBe(404)
    const badToken = await as(sam).get(`${REPO}/blobs/proofs/bad!token`)
    expect(badToken.status).toBe(400)
  })
})
