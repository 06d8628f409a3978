/**
 * Backup and restore in cluster mode, by the documented procedure (docs/operations.md): a running
 * cluster with several repositories (branches, merges, an executable, an 11 MiB binary split into
 * chunks, and one pushed to all through the backup) is backed up with scripts/ops/backup.sh (pg_dump
 * first, then the bucket); a second, empty
 * cluster (its own PostgreSQL, MinIO bucket and Kafka) takes it with scripts/ops/restore.sh; a node
 * started on it passes `grove-server fsck` and serves clones byte-identical to the original's, by
 * the real `grove`. Then fsck is shown failing: one object overwritten and another deleted in the
 * bucket are both named, and it exits 1.
 */
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import { at, type GroveOptions, json, listing, ok, removeTempDirs, tempDir, userOf } from "../cli/harness.ts"
import { type ClusterInfra, createClusterUser, startClusterInfra } from "../support/ClusterInfra.ts"
import { type GroveServer, ROOT, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"

const exec = promisify(execFile)

let source: ClusterInfra | undefined
let target: ClusterInfra | undefined
let nodeA: GroveServer | undefined
let nodeB: GroveServer | undefined
let key: string
/** Every repository and branch to clone back, with what a clone of it from the original cluster holds. */
const originals: Array<{ repo: string; branch: string; files: Record<string, string> }> = []

const startNode = (infra: ClusterInfra, id: string) =>
  startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "20000" }, args: ["--node-id", id] })

/** A script of scripts/ops against a cluster's settings, with this process's Node. */
const ops = (script: string, dir: string, infra: ClusterInfra) =>
  exec("bash", [path.join(ROOT, "scripts/ops", script), dir], {
    env: { ...process.env, ...infra.env, NODE: process.execPath },
    timeout: 240_000
  })

const fsck = (infra: ClusterInfra) => run(SERVER_BIN, ["fsck", "--json"], { env: infra.env, timeoutMs: 240_000 })

/** fsck's JSON lines: the problems, and the summary last. */
const parseFsck = (stdout: string) => {
  const lines = stdout.trim().split("\n").map((line) => JSON.parse(line) as { problem?: Record<string, string>; summary?: any })
  return { problems: lines.flatMap((l) => l.problem === undefined ? [] : [l.problem]), summary: lines.at(-1)!.summary }
}

const sql = async (infra: ClusterInfra, query: string) =>
  (await exec("psql", ["--no-psqlrc", "-tA", "--dbname", infra.databaseUrl, "-c", query], { timeout: 60_000 })).stdout.trim().split("\n")

const bucketOf = (infra: ClusterInfra) => ({
  bucket: infra.env.GROVE_S3_BUCKET!,
  client: new S3Client({
    endpoint: infra.env.GROVE_S3_ENDPOINT!,
    region: infra.env.GROVE_S3_REGION!,
    forcePathStyle: true,
    credentials: { accessKeyId: infra.env.GROVE_S3_ACCESS_KEY_ID!, secretAccessKey: infra.env.GROVE_S3_SECRET_ACCESS_KEY! }
  })
})

const cloneListing = async (user: GroveOptions, repo: string, branch: string) => {
  const parent = tempDir("clone")
  await ok(["clone", `alice/${repo}`, "copy", "--branch", branch], at(user, parent))
  return listing(path.join(parent, "copy"))
}

const write = (root: string, file: string, content: string | Uint8Array, mode = 0o644) => {
  fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
  fs.writeFileSync(path.join(root, file), content, { mode })
}

beforeAll(async () => {
  // Both clusters' infrastructure at once: the second stays empty until the restore.
  ;[source, target] = await Promise.all([startClusterInfra(), startClusterInfra()])
  key = await createClusterUser(source, "alice", { admin: true })
  nodeA = await startNode(source, "backup-a")
  const alice = userOf(nodeA, "alice", key)

  // Three repositories set up side by side. garden: two merges onto main, an 11 MiB binary (several
  // chunks), an executable, and an open branch; meadow: one merge; plot: a branch never merged.
  const garden = async () => {
    const dir = tempDir("garden")
    await ok(["init", "--name", "garden"], at(alice, dir))
    write(dir, "README.md", "# Garden\n")
    write(dir, "bin/run.sh", "#!/bin/sh\necho grow\n", 0o755)
    write(dir, "assets/seed.bin", randomBytes(11 * 1024 * 1024))
    for (let i = 0; i < 40; i++) write(dir, `beds/bed-${i}.txt`, `bed ${i}\n`.repeat(i + 1))
    await ok(["push"], at(alice, dir))
    await ok(["desc", "Plant the garden"], at(alice, dir))
    await ok(["merge"], at(alice, dir))
    write(dir, "README.md", "# Garden\n\nNow with paths.\n")
    write(dir, "paths/stone.txt", "stone\n")
    await ok(["push"], at(alice, dir))
    await ok(["desc", "Lay the paths"], at(alice, dir))
    await ok(["merge"], at(alice, dir))
    originals.push({ repo: "garden", branch: "main", files: await cloneListing(alice, "garden", "main") })
    write(dir, "beds/bed-0.txt", "replanted\n")
    fs.rmSync(path.join(dir, "beds/bed-1.txt"))
    const open = json(await ok(["push", "--json"], at(alice, dir)))
    originals.push({ repo: "garden", branch: open.branch, files: listing(dir) })
  }
  const meadow = async () => {
    const dir = tempDir("meadow")
    await ok(["init", "--name", "meadow"], at(alice, dir))
    write(dir, "grass.txt", "grass\n".repeat(1000))
    await ok(["push"], at(alice, dir))
    await ok(["desc", "Sow"], at(alice, dir))
    await ok(["merge"], at(alice, dir))
    // After the merge the checkout is on a new branch from main: its files are main's.
    originals.push({ repo: "meadow", branch: "main", files: listing(dir) })
  }
  const plot = async () => {
    const dir = tempDir("plot")
    await ok(["init", "--name", "plot"], at(alice, dir))
    write(dir, "notes.md", "unmerged work\n")
    const pushed = json(await ok(["push", "--json"], at(alice, dir)))
    originals.push({ repo: "plot", branch: pushed.branch, files: listing(dir) })
  }
  await Promise.all([garden(), meadow(), plot()])
}, 600_000)

afterAll(async () => {
  await nodeA?.stop()
  await nodeB?.stop()
  await Promise.all([source?.close(), target?.close()])
  removeTempDirs()
}, 300_000)

describe("backup and restore of a cluster", () => {
  it("backup.sh of a running cluster, restore.sh into an empty one: fsck is clean and every clone is byte-identical", async () => {
    // A repository pushed to all through the backup: the dump catches it between two pushes, and the
    // restore must hold exactly one of the states that were pushed, with every object it names.
    const alice = userOf(nodeA!, "alice", key)
    const busy = tempDir("busy")
    await ok(["init", "--name", "busy"], at(alice, busy))
    write(busy, "start.txt", "start\n")
    const busyBranch: string = json(await ok(["push", "--json"], at(alice, busy))).branch
    const pushed: Array<Record<string, string>> = [listing(busy)]
    let backingUp = true
    const writer = (async () => {
      for (let i = 0; backingUp; i++) {
        write(busy, `w/${i}.bin`, randomBytes(300_000))
        write(busy, "start.txt", `start ${i}\n`)
        await ok(["push"], at(alice, busy))
        pushed.push(listing(busy))
      }
    })()
    const backup = tempDir("backup")
    const made = await ops("backup.sh", backup, source!).finally(() => (backingUp = false))
    await writer
    expect(made.stdout).toMatch(/backup: /)
    expect(fs.statSync(path.join(backup, "database.dump")).size).toBeGreaterThan(0)

    const restored = await ops("restore.sh", backup, target!)
    expect(restored.stdout).toMatch(/objects: \d+ restored/)
    // The restore refuses a cluster that is not empty any more.
    await expect(ops("restore.sh", backup, target!)).rejects.toThrow(/already has \d+ tables/)

    nodeB = await startNode(target!, "restored-b")
    const checked = await fsck(target!)
    expect(checked.code, checked.stdout + checked.stderr).toBe(0)
    const { problems, summary } = parseFsck(checked.stdout)
    expect(problems).toEqual([])
    console.log(`fsck of the restored cluster: ${JSON.stringify(summary)}`)
    expect(summary).toMatchObject({ ok: true, counts: { repositories: 4 } })
    expect(summary.counts.chunks).toBeGreaterThan(40)
    expect(summary.counts.packs).toBeGreaterThan(0)

    const restoredAlice = userOf(nodeB, "alice", key)
    for (const original of originals) {
      expect(await cloneListing(restoredAlice, original.repo, original.branch), `${original.repo} ${original.branch}`).toEqual(original.files)
    }
    expect(Object.keys(originals.find((o) => o.repo === "garden")!.files)).toContain("assets/seed.bin")
    expect(pushed).toContainEqual(await cloneListing(restoredAlice, "busy", busyBranch))
  }, 600_000)

  it("fsck names an overwritten object and a deleted one, and exits 1", async () => {
    // Needs the restored cluster of the test above.
    expect(nodeB).toBeDefined()
    const [lone] = await sql(target!, "SELECT org_id || '/' || hash FROM chunks WHERE pack IS NULL ORDER BY size DESC LIMIT 1")
    // A byte inside one of a pack's chunks: a pack may hold bytes between its chunks (a batch's frame headers, stored
    // as the body arrived), where a flipped byte damages the pack and no chunk.
    const [packed] = await sql(target!, "SELECT org_id || '/' || pack || ' ' || (pack_offset + size / 2) FROM chunks WHERE pack IS NOT NULL AND size > 0 ORDER BY 1 LIMIT 1")
    const [pack, inChunk] = packed!.split(" ")
    expect(lone).toMatch(/^[0-9a-f-]{36}\/[0-9a-f]{64}$/)
    expect(pack).toMatch(/^[0-9a-f-]{36}\/[0-9a-f]{64}$/)
    const { client, bucket } = bucketOf(target!)
    try {
      const body = await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: pack }))).Body!.transformToByteArray()
      body[Number(inChunk)]! ^= 0xff
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: pack, Body: body }))
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: lone }))
    } finally {
      client.destroy()
    }

    const checked = await fsck(target!)
    expect(checked.code, checked.stderr).toBe(1)
    const { problems, summary } = parseFsck(checked.stdout)
    expect(summary.ok).toBe(false)
    expect(problems).toContainEqual(expect.objectContaining({ kind: "missing", object: "chunk", name: lone!.split("/")[1], owner: "alice" }))
    expect(problems).toContainEqual(expect.objectContaining({ kind: "corrupt", object: "pack", name: pack!.split("/")[1], owner: "alice" }))
    // The pack's damaged chunk is named too, with the blob and repository that use it.
    expect(problems).toContainEqual(expect.objectContaining({ kind: "corrupt", object: "chunk", referencedBy: expect.stringMatching(/blob [0-9a-f]{64} in alice\//) }))
    expect(problems.filter((p) => p.kind === "missing")).toHaveLength(1)
    // And in text: the same problems, one line each, and the summary.
    const text = await run(SERVER_BIN, ["fsck"], { env: target!.env, timeoutMs: 240_000 })
    expect(text.code).toBe(1)
    expect(text.stdout).toContain(`missing    chunk ${lone!.split("/")[1]} (alice)`)
    expect(text.stdout).toMatch(/fsck: 4 repositories, .* problems \(1 missing, \d+ corrupt\)/)
  }, 600_000)
})
