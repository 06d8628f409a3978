/**
 * Content in cluster mode: two grove-server nodes on real Kafka, PostgreSQL and S3 (MinIO). Chunks
 * uploaded through one node and a push through it are read back through the other; a merge through
 * the other node lands on main; git clone and the zip work from either node; the outbox events
 * (`branch.created`, `push`, `merge`) are on `grove.events`, read by the stock kcat.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Blake3 from "@grove/core/objects/Blake3"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { batchBody, buildCommit, chunkRefs, decodeBatch, pushBody } from "../support/content.ts"
import { type ClusterInfra, startClusterInfra } from "../support/ClusterInfra.ts"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const exec = promisify(execFile)

let infra: ClusterInfra
let nodeA: GroveServer
let nodeB: GroveServer
let key: string
let work: string

beforeAll(async () => {
  infra = await startClusterInfra()
  const created = await run(SERVER_BIN, ["user", "create", "cleo"], { env: infra.env })
  expect(created.code, created.stderr).toBe(0)
  key = created.stdout.trim().split("\n").pop()!
  nodeA = await startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "15000" }, args: ["--node-id", "content-a"] })
  nodeB = await startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "15000" }, args: ["--node-id", "content-b"] })
  work = fs.mkdtempSync(path.join(os.tmpdir(), "grove-cluster-content-"))
}, 600_000)

afterAll(async () => {
  await nodeA?.stop()
  await nodeB?.stop()
  await infra?.close()
  if (work !== undefined) fs.rmSync(work, { recursive: true, force: true })
})

/** A create right after nodes join may answer 202 while partitions move; wait for the repository to exist. */
const createRepo = async (node: GroveServer, name: string) => {
  const reply = await api(node.url, key).post("/repos", { name, is_public: true })
  expect([201, 202]).toContain(reply.status)
  for (let i = 0; i < 150; i++) {
    if ((await api(node.url, key).get(`/cleo/${name}`)).status === 200) return
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error("repository never appeared")
}

const events = async () => {
  const { stdout } = await exec("kcat", ["-C", "-b", infra.kafkaBootstrap, "-t", "grove.events", "-o", "beginning", "-e", "-q"], { timeout: 60_000 })
  return stdout.trim().split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Record<string, unknown>)
}

describe("content in cluster mode", () => {
  it("pushes through one node, reads, merges and exports through the other", async () => {
    await createRepo(nodeA, "shared")
    let seed = 99
    const big = Uint8Array.from({ length: 11 * 1024 * 1024 }, () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24)
    const refs = chunkRefs(big)
    const up = await fetch(`${nodeA.url}/api/cleo/shared/chunks/batch`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: batchBody(refs) })
    expect(up.status).toBe(200)
    const c1 = buildCommit({ branch: "topic", files: { "README.md": "cluster\n", "data/big.bin": big } })
    const blobs = [{ hash: Blake3.hash(big), content: [], size: big.length, chunks: refs.map(({ hash, offset, size }) => ({ hash, offset, size })) }, {
      hash: Blake3.hash("cluster\n"),
      content: Array.from(new TextEncoder().encode("cluster\n")),
      size: 8
    }]
    const pushed = await api(nodeA.url, key).post("/cleo/shared/push", pushBody({ branch: "topic", commits: [c1], blobs, description: "Cluster change" }))
    expect(pushed.body, JSON.stringify(pushed.body)).toEqual({ success: true, new_head: c1.commit.hash, message: "ok" })
    const c2 = buildCommit({ branch: "topic", parent: c1, files: { "README.md": "cluster v2\n", "data/big.bin": big } })
    const second = await api(nodeB.url, key).post("/cleo/shared/push", pushBody({ branch: "topic", commits: [c2], expectedHead: c1.commit.hash }))
    expect(second.body.success).toBe(true)

    // Node B reads what node A stored (PostgreSQL rows, S3 bytes).
    const pull = await api(nodeB.url, key).get("/cleo/shared/pull?branch_name=topic")
    expect(pull.body.commits.map((c: { hash: string }) => c.hash)).toEqual([c1.commit.hash, c2.commit.hash])
    const fetched = await fetch(`${nodeB.url}/api/cleo/shared/chunks/fetch`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ hashes: refs.map((r) => r.hash) })
    })
    const fetchedBody = new Uint8Array(await fetched.arrayBuffer())
    expect(fetched.status, Buffer.from(fetchedBody.subarray(0, 300)).toString()).toBe(200)
    const frames = await decodeBatch(fetchedBody)
    expect(Blake3.hash(new Uint8Array(Buffer.concat(frames.map((f) => f.data))))).toBe(Blake3.hash(big))

    const merged = await api(nodeB.url, key).post("/cleo/shared/branches/topic/merge")
    expect(merged.status, JSON.stringify(merged.body)).toBe(200)
    expect(merged.body).toMatchObject({ merge_parent_hash: c2.commit.hash, message: "Cluster change" })
    expect((await api(nodeA.url, key).get("/cleo/shared/branches/topic")).body).toMatchObject({ status: "closed", state: "merged" })

    const dest = path.join(work, "clone")
    await exec("git", ["clone", "-q", `${nodeA.url}/cleo/shared.git`, dest], { env: { ...process.env, GIT_TERMINAL_PROMPT: "0" } })
    expect(fs.readFileSync(path.join(dest, "README.md"), "utf8")).toBe("cluster v2\n")
    expect(Blake3.hash(new Uint8Array(fs.readFileSync(path.join(dest, "data/big.bin"))))).toBe(Blake3.hash(big))
    const zip = await fetch(`${nodeB.url}/cleo/shared/download`)
    expect(zip.status).toBe(200)
    const zipPath = path.join(work, "shared.zip")
    fs.writeFileSync(zipPath, Buffer.from(await zip.arrayBuffer()))
    await exec("unzip", ["-tq", zipPath])

    // The outbox relay published the branch's events, in order, with the merge last.
    let seen: Array<Record<string, unknown>> = []
    for (let i = 0; i < 60; i++) {
      seen = (await events()).filter((e) => e.repo === "shared" && ["branch.created", "push", "merge"].includes(String(e.type)))
      if (seen.some((e) => e.type === "merge")) break
      await new Promise((r) => setTimeout(r, 500))
    }
    expect(seen.map((e) => e.type)).toEqual(["branch.created", "push", "merge"])
    expect(seen[0]).toMatchObject({ branch: "topic", commit: c1.commit.hash, pusher: "cleo", owner: "cleo" })
    expect(seen[1]).toMatchObject({ branch: "topic", commit: c2.commit.hash })
    expect(seen[2]).toMatchObject({ branch: "topic", commit: merged.body.commit_hash })
  }, 240_000)

  it("gates merges on CI records: 412 while running or failing, force=1 overrides and is audited", async () => {
    await createRepo(nodeA, "gated")
    const c = buildCommit({ branch: "ci", files: { "app.txt": "v1\n" } })
    expect((await api(nodeA.url, key).post("/cleo/gated/push", pushBody({ branch: "ci", commits: [c], description: "Gated" }))).body.success).toBe(true)
    const psql = (query: string) => exec("psql", [infra.databaseUrl, "-v", "ON_ERROR_STOP=1", "-qtAc", query])
    const run = (id: string, status: string, conclusion: string | null, queuedAt: string) =>
      psql(`INSERT INTO ci_runs (id, repo_id, workflow_name, workflow_path, event, branch, commit_hash, triggered_by, status, conclusion, queued_at)
        SELECT ${id}, r.id, 'test', '.oak/workflows/test.yml', 'push', 'ci', '${c.commit.hash}', 'cleo', '${status}', ${conclusion === null ? "NULL" : `'${conclusion}'`}, '${queuedAt}'
        FROM repositories r WHERE r.name = 'gated'`)
    await run("900001", "running", null, "2026-11-22T10:00:00Z")
    const running = await api(nodeB.url, key).post("/cleo/gated/branches/ci/merge")
    expect(running.status).toBe(412)
    expect(running.body.code).toBe("ci_running")
    await psql("UPDATE ci_runs SET status = 'completed', conclusion = 'failure' WHERE id = '900001'")
    const failing = await api(nodeB.url, key).post("/cleo/gated/branches/ci/merge")
    expect(failing.status).toBe(412)
    expect(failing.body.code).toBe("ci_failing")
    // A newer successful run of the same workflow opens the gate; a failing one closes it again.
    await run("900002", "completed", "success", "2026-11-22T10:05:00Z")
    await run("900003", "completed", "timed_out", "2026-11-22T10:10:00Z")
    expect((await api(nodeA.url, key).post("/cleo/gated/branches/ci/merge")).status).toBe(412)
    expect((await api(nodeA.url, key).get("/cleo/gated/branches/ci")).body.status).toBe("open")
    const forced = await api(nodeA.url, key).post("/cleo/gated/branches/ci/merge?force=1")
    expect(forced.status, JSON.stringify(forced.body)).toBe(200)
    const { stdout } = await psql("SELECT action || ' ' || (details->>'ci_gate_overridden') FROM audit_log WHERE action LIKE 'branch.merge%' AND target = 'cleo/gated'")
    expect(stdout.trim()).toBe("branch.merge.forced true")
  }, 120_000)
})
