/**
 * The integrity protocol against the real server, as the Oak client uses it before a clone:
 * capabilities (and whether the key was accepted), the bounded proof and its snapshot token, and
 * the pull that checks the token (412 once a head moved). Refusals are 400 with `{error, code}`.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, isErrorBody } from "../support/http.ts"

let server: GroveServer
let sam: string
let tina: string
let first: ReturnType<typeof buildCommit>

beforeAll(async () => {
  server = await startServer()
  sam = await server.createUser("sam")
  tina = await server.createUser("tina")
  expect((await api(server.url, sam).post("/repos", { name: "proved", is_public: true })).status).toBe(201)
  expect((await api(server.url, sam).post("/repos", { name: "secret" })).status).toBe(201)
  first = buildCommit({ branch: "feat", files: { "a.txt": "a\n", "dir/b.txt": "b\n" } })
  expect((await api(server.url, sam).post("/sam/proved/push", pushBody({ branch: "feat", commits: [first] }))).body.success).toBe(true)
}, 300_000)

afterAll(async () => {
  await server?.stop()
})

const R = "/sam/proved"

describe("integrity", () => {
  it("capabilities offer the bounded profile and say whether the presented key was accepted", async () => {
    expect((await api(server.url, sam).get(`${R}/integrity/capabilities`)).body).toEqual({
      schema_version: 1,
      clone_preflight_profile: "bounded_v1",
      selected_branch_acquisition: "exact_head_v1",
      sparse_materialization_protocol: "cone_v1",
      credential_presented: true,
      credential_accepted: true
    })
    expect((await api(server.url).get(`${R}/integrity/capabilities`)).body).toMatchObject({ credential_presented: false, credential_accepted: false })
    expect((await api(server.url, "grove_not-a-key").get(`${R}/integrity/capabilities`)).status).toBe(401)
    expect((await api(server.url, tina).get("/sam/secret/integrity/capabilities")).status).toBe(404)
  })

  it("a bounded proof of a healthy repository is complete, names the selected branch and pins it for the pull", async () => {
    const report = await api(server.url, sam).get(`${R}/integrity?verify=existence&proof_profile=bounded_v1&selected_branch=feat&expected_head=${first.commit.hash}&known_loss_protocol=report_v1`)
    expect(report.status).toBe(200)
    expect(report.body).toMatchObject({
      schema_version: 1,
      repo: "sam/proved",
      status: "healthy",
      healthy: true,
      complete: true,
      truncated: false,
      verification: "existence",
      proof_profile: "bounded_v1",
      known_loss_protocol: "report_v1",
      selected_branch: { name: "feat", head: first.commit.hash, status: "open" },
      findings: [],
      scope: { commit_count: 1, manifest_count: 1, blob_count: 2 }
    })
    const token = report.body.snapshot_token as string
    const pull = (extra = "") => api(server.url, sam).get(`${R}/pull?selected_branch=feat&expected_head=${first.commit.hash}&integrity_snapshot=${token}${extra}`)
    const pulled = await pull()
    expect(pulled.status).toBe(200)
    // main is empty: the selected branch's own commits come with the pull.
    expect(pulled.body.commits.map((c: { hash: string }) => c.hash)).toEqual([first.commit.hash])
    expect(pulled.body.blobs).toHaveLength(2)

    // Another scope than the proved one, or a head that moved since: 412.
    const scope = await pull("&paths=dir")
    expect([scope.status, scope.body.code]).toEqual([412, "snapshot_changed"])
    const other = buildCommit({ branch: "other", files: { "c.txt": "c\n" } })
    expect((await api(server.url, sam).post(`${R}/push`, pushBody({ branch: "other", commits: [other] }))).body.success).toBe(true)
    const moved = await pull()
    expect([moved.status, moved.body.code]).toEqual([412, "snapshot_changed"])
    const unpinned = await api(server.url, sam).get(`${R}/pull?selected_branch=feat`)
    expect([unpinned.status, unpinned.body.code]).toEqual([412, "snapshot_required"])
    const garbage = await api(server.url, sam).get(`${R}/pull?integrity_snapshot=zz`)
    expect(garbage.status).toBe(400)
    const wrongHead = await api(server.url, sam).get(`${R}/integrity?proof_profile=bounded_v1&selected_branch=feat&expected_head=${"0".repeat(64)}`)
    expect([wrongHead.status, wrongHead.body.code]).toEqual([412, "selected_branch_changed"])
  })

  it("blob evidence names where a blob is and proves its bytes; malformed requests answer 400", async () => {
    const hash = first.snapshot.get("dir/b.txt")!.hash
    const report = await api(server.url, sam).get(`${R}/integrity?verify=bytes&blob=${hash}&branch=feat&depth=1&max_bytes=1000`)
    expect(report.body).toMatchObject({ healthy: true, scope: { depth: 1, commit_count: 1, verified_byte_count: 2 } })
    expect(report.body.blob_evidence).toEqual([{
      hash,
      metadata_present: true,
      mapping_present: true,
      chunks: [{ hash, offset: 0, size: 2, metadata_present: true, object_present: true, hash_verified: true }],
      affected: [{ commit: first.commit.hash, path: "dir/b.txt" }]
    }])
    for (const query of ["verify=everything", "depth=0", "depth=x", `expected_head=${hash}`, "proof_profile=bounded_v1&blob=" + hash, "selected_branch=feat", "paths=a/../b", "blob=nothex", "sparse_materialization_protocol=v9"]) {
      const bad = await api(server.url, sam).get(`${R}/integrity?${query}`)
      expect(bad.status, query).toBe(400)
      expect(isErrorBody(bad.body)).toBe(true)
    }
  })
})
