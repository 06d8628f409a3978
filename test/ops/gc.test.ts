/**
 * `grove-server gc` on an embedded data directory, with garbage made the real way where it can be:
 * a repository pushed with the real `grove` and deleted, chunks uploaded through the API and never
 * referenced; and, written into the database while the server is stopped, what only failures and
 * time leave behind: a staged push list a dead command never took, CI log pieces and a cache of a run
 * finished ten days ago, and old webhook deliveries with their attempts.
 *
 * The first run marks; after the grace a dry run reports, and the real run then frees, exactly the
 * unreferenced chunks, packs and blobs (lowering the organization's used bytes by what the deleted
 * repository alone held), the push list and what is past its retention; every repository still clones
 * byte-identical, and content freed from under an old upload grant is pushed again whole. The real
 * run's report equals the dry run's (so the dry run deleted nothing).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Objects } from "@grove/core"
import { DbEmbedded, ObjectStore, ObjectStoreLocal } from "@grove/storage"
import { Effect, Layer, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { createHash, randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { at, type GroveOptions, json, listing, ok, removeTempDirs, tempDir } from "../cli/harness.ts"
import { noise } from "../support/content.ts"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"
import { waitFor } from "../support/waitFor.ts"

const GRACE = ["--gc-grace-seconds", "1"]
const RETENTION = ["--retention-ci-logs-days", "1", "--retention-ci-caches-days", "1", "--retention-webhook-deliveries-days", "1"]
const METRICS_TOKEN = "gc-test-metrics-token-0123456789"

let dataDir: string
let server: GroveServer | undefined
let alice: GroveOptions
let key: string

beforeAll(async () => {
  dataDir = tempDir("gc-data")
  server = await startServer({ dataDir, args: ["--gc-interval-seconds", "0"] })
  key = await server.createUser("alice")
  alice = { home: tempDir("alice"), env: { SERVICE_API_KEY: key, GROVE_REMOTE: server.url } }
}, 300_000)

afterAll(async () => {
  await server?.stop()
  removeTempDirs()
}, 300_000)

const writeTree = (root: string, files: Record<string, string | Uint8Array>) => {
  for (const [file, bytes] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
    fs.writeFileSync(path.join(root, file), bytes)
  }
}

const pushed = async (name: string, files: Record<string, string | Uint8Array>) => {
  const work = tempDir(name)
  writeTree(work, files)
  const branch: string = json(await ok(["init", "--name", name, "--json"], at(alice, work))).branch
  await ok(["commit", "--json"], at(alice, work))
  await ok(["push", "--json"], at(alice, work))
  return { work, branch }
}

const clonedListing = async (name: string, branch: string) => {
  const parent = tempDir(`clone-${name}`)
  await ok(["clone", `alice/${name}`, "copy", "--branch", branch], at(alice, parent))
  return listing(path.join(parent, "copy"))
}

const inDb = <A>(effect: Effect.Effect<A, unknown, SqlClient.SqlClient | ObjectStore.ObjectStore>) =>
  Effect.runPromise(effect.pipe(
    Effect.provide(Layer.mergeAll(
      DbEmbedded.layer({ dataDir: path.join(dataDir, "db") }),
      ObjectStoreLocal.layer({ root: path.join(dataDir, "objects") })
    ))
  ))

const gc = async (...args: Array<string>) => {
  const result = await run(SERVER_BIN, ["gc", "--json", "--data-dir", dataDir, ...GRACE, ...RETENTION, ...args], { timeoutMs: 240_000 })
  expect(result.code, result.stderr).toBe(0)
  return JSON.parse(result.stdout.trim().split("\n").at(-1)!)
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")

describe("grove-server gc (embedded)", () => {
  it("frees exactly the unreferenced content and what is past its retention; everything still clones", async () => {
    const shared = "shared between both repositories\n".repeat(40)
    const keepFiles = { "README.md": "# keep\n", "shared.txt": shared, "data/keep.bin": noise(30_000, 11) }
    const goneFiles = { "shared.txt": shared, "a.txt": "only in gone, a\n".repeat(30), "b.txt": "only in gone, b\n".repeat(30), "c.bin": noise(20_000, 12) }
    const keep = await pushed("keep", keepFiles)
    await pushed("gone", goneFiles)
    const goneOnly = ["a.txt", "b.txt", "c.bin"].map((f) => Objects.Blake3.hash(goneFiles[f as keyof typeof goneFiles] as string | Uint8Array))
    // Chunks uploaded and never referenced (an abandoned push); one of them is pushed again after gc.
    const strays = [noise(5_000, 21), noise(6_000, 22)]
    const strayHashes = strays.map((bytes) => Objects.Blake3.hash(bytes))
    for (const [i, bytes] of strays.entries()) {
      const response = await fetch(`${server!.url}/api/alice/keep/chunks/${strayHashes[i]}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/octet-stream" },
        body: bytes
      })
      expect(response.status, await response.text()).toBeLessThan(300)
    }
    // A chunk younger than the grace (1 s) is live: on a quick machine the first run came within it and left the strays.
    const uploadedAt = Date.now()
    await ok(["repo", "delete", "alice/gone", "--yes"], alice)
    await server!.stop()
    server = undefined

    // Run 1: the unreferenced content is only marked (and its upload grants revoked); nothing is freed before the grace.
    const zero = { ciLogPieces: 0, ciCaches: 0, ciObjects: 0, ciBytes: 0, webhookDeliveries: 0, webhookAttempts: 0 }
    await waitFor("the strays to be older than the grace", async () => Date.now() - uploadedAt > 1_500 ? true : undefined)
    const first = await gc()
    const markedAt = Date.now()
    expect(first.content).toEqual({
      stagedPushes: 0,
      marked: { blobs: 3, chunks: 5 },
      unmarked: 0,
      freed: { blobs: 0, chunks: 0, objects: 0, bytes: 0, usedBytes: 0, namespaces: 0 }
    })
    expect(first.retention).toEqual(zero)

    // What failures and time leave behind, and what the next run must free (computed from the rows before it).
    const before = await inDb(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const store = yield* ObjectStore.ObjectStore
      const [keep] = yield* sql<{ id: string; org_id: string }>`SELECT id::text AS id, org_id::text AS org_id FROM repositories WHERE name = 'keep'`
      yield* sql`INSERT INTO staged_pushes (id, repo_id, body, created_at)
        VALUES (${randomUUID()}, ${keep!.id}, ${JSON.stringify({ trees: [], blobs: [] })}, now() - interval '2 hours')`
      const ns = `ci-${keep!.org_id}`
      const pieces = ["old piece one\n", "old piece two\n", "new piece\n"]
      for (const text of pieces) yield* store.put({ namespace: ns, hash: sha256(text) }, Stream.make(new TextEncoder().encode(text)))
      yield* store.put({ namespace: ns, hash: sha256("cache") }, Stream.make(new TextEncoder().encode("cache")))
      const run = (finished: string) =>
        sql<{ id: string }>`INSERT INTO ci_runs (repo_id, workflow_name, workflow_path, event, branch, commit_hash, triggered_by, status, conclusion, finished_at)
          VALUES (${keep!.id}, 'ci', '.grove/ci.yml', 'manual', 'main', 'x', 'alice', 'completed', 'success', ${finished}::timestamptz)
          RETURNING id::text AS id`
      const [old] = yield* run(new Date(Date.now() - 10 * 86_400_000).toISOString())
      const [recent] = yield* run(new Date().toISOString())
      // The recent run's piece has the same bytes as an old one: that object stays.
      const logRows = [[old!.id, pieces[0]!], [old!.id, pieces[1]!], [recent!.id, pieces[0]!]] as const
      for (const [seq, [runId, text]] of logRows.entries()) {
        yield* sql`INSERT INTO ci_log_chunks (run_id, step_id, seq, object_hash, bytes) VALUES (${runId}, 0, ${seq}, ${sha256(text)}, ${text.length})`
      }
      yield* sql`INSERT INTO ci_caches (repo_id, branch, cache_key, object_hash, bytes, updated_at)
        VALUES (${keep!.id}, 'main', 'deps', ${sha256("cache")}, 5, now() - interval '10 days')`
      const hook = randomUUID()
      yield* sql`INSERT INTO webhooks (id, repo_id, url, events, created_by) VALUES (${hook}, ${keep!.id}, 'https://hooks.example/x', '["push"]', 'alice')`
      const delivery = (status: string, age: string, attempts: number) =>
        Effect.gen(function*() {
          const id = randomUUID()
          yield* sql`INSERT INTO webhook_deliveries (id, webhook_id, event, body, status, attempts, created_at, updated_at)
            VALUES (${id}, ${hook}, 'push', '{}', ${status}, ${attempts}, now() - ${age}::interval, now() - ${age}::interval)`
          for (let a = 1; a <= attempts; a++) {
            yield* sql`INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, node) VALUES (${id}, ${a}, now(), 1, 'n')`
          }
        })
      yield* delivery("succeeded", "10 days", 2)
      yield* delivery("dead", "10 days", 1)
      yield* delivery("retrying", "10 days", 1)
      yield* delivery("succeeded", "1 minute", 1)
      const garbage = [...goneOnly, ...strayHashes]
      const rows = yield* sql<{ hash: string; size: string; pack: string | null; referenced: boolean }>`
        SELECT hash, size::text AS size, pack, referenced FROM chunks WHERE org_id = ${keep!.org_id}`
      const freed = rows.filter((r) => garbage.includes(r.hash))
      const kept = rows.filter((r) => !garbage.includes(r.hash))
      const keptObjects = new Set(kept.map((r) => r.pack ?? r.hash))
      const freedObjects = new Set(freed.map((r) => r.pack ?? r.hash).filter((o) => !keptObjects.has(o)))
      const [org] = yield* sql<{ used: string }>`SELECT used_bytes::text AS used FROM organizations WHERE id = ${keep!.org_id}`
      return {
        orgId: keep!.org_id,
        freed,
        kept,
        freedObjects: [...freedObjects],
        keptObjects: [...keptObjects],
        used: Number(org!.used)
      }
    }))
    expect(before.freed.map((r) => r.hash).sort()).toEqual([...goneOnly, ...strayHashes].sort())
    const sum = (rows: ReadonlyArray<{ size: string }>) => rows.reduce((n, r) => n + Number(r.size), 0)
    const counted = sum(before.freed.filter((r) => r.referenced))
    expect(counted).toBe(sum(before.freed.filter((r) => goneOnly.includes(r.hash))))

    // Run 2, past the grace: a dry run, then the real one, free the marked content, the push list and what is past its retention.
    await waitFor("the grace period", async () => Date.now() - markedAt > 1_500 ? true : undefined)
    const dry = await gc("--dry-run")
    expect(dry.dry_run).toBe(true)
    expect(dry.content).toEqual({
      stagedPushes: 1,
      marked: { blobs: 0, chunks: 0 },
      unmarked: 0,
      freed: { blobs: 3, chunks: before.freed.length, objects: before.freedObjects.length, bytes: sum(before.freed), usedBytes: counted, namespaces: 0 }
    })
    expect(dry.retention).toEqual({ ciLogPieces: 2, ciCaches: 1, ciObjects: 2, ciBytes: "old piece two\n".length + 5, webhookDeliveries: 2, webhookAttempts: 3 })
    // The real run does exactly what the dry run reported (had the dry run deleted anything, this would find less).
    const second = await gc()
    expect({ ...second, duration_ms: 0 }).toEqual({ ...dry, dry_run: false, duration_ms: 0 })

    const after = await inDb(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const store = yield* ObjectStore.ObjectStore
      const has = (namespace: string, hash: string) => store.has({ namespace, hash })
      const chunks = yield* sql<{ hash: string }>`SELECT hash FROM chunks WHERE org_id = ${before.orgId}`
      const [org] = yield* sql<{ used: string }>`SELECT used_bytes::text AS used FROM organizations WHERE id = ${before.orgId}`
      const ns = `ci-${before.orgId}`
      return {
        chunks: chunks.map((c) => c.hash).sort(),
        used: Number(org!.used),
        freedObjects: yield* Effect.forEach(before.freedObjects, (o) => has(before.orgId, o)),
        keptObjects: yield* Effect.forEach(before.keptObjects, (o) => has(before.orgId, o)),
        ciObjects: yield* Effect.forEach(["old piece one\n", "old piece two\n", "new piece\n", "cache"], (t) => has(ns, sha256(t))),
        logPieces: (yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM ci_log_chunks`)[0]!.n,
        deliveries: (yield* sql<{ status: string }>`SELECT status FROM webhook_deliveries ORDER BY status`).map((d) => d.status),
        attempts: (yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM webhook_attempts`)[0]!.n,
        staged: (yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM staged_pushes`)[0]!.n,
        marks: (yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM gc_marks`)[0]!.n
      }
    }))
    expect(after.chunks).toEqual(before.kept.map((r) => r.hash).sort())
    expect(after.used).toBe(before.used - counted)
    expect(after.freedObjects.every((present) => !present)).toBe(true)
    expect(after.keptObjects.every((present) => present)).toBe(true)
    expect(after.ciObjects).toEqual([true, false, true, false])
    expect(after).toMatchObject({ logPieces: "1", deliveries: ["retrying", "succeeded"], attempts: "2", staged: "0", marks: "0" })

    // Served again (its own gc running every 3 s): keep clones as pushed, and gone's content (and a stray) push anew.
    server = await startServer({
      dataDir,
      args: ["--gc-interval-seconds", "3", "--gc-grace-seconds", "600", "--metrics-token", METRICS_TOKEN]
    })
    alice = { ...alice, env: { ...alice.env, GROVE_REMOTE: server.url } }
    expect(await clonedListing("keep", keep.branch)).toEqual(listing(keep.work))
    const again = await pushed("again", { ...goneFiles, "stray.bin": strays[0]! })
    expect(await clonedListing("again", again.branch)).toEqual(listing(again.work))
    const metrics = await waitFor("gc runs in /metrics", async () => {
      const text = await (await fetch(`${server!.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()
      return /grove_gc_runs_total\{[^}]*outcome="ok"[^}]*\} [1-9]/.test(text) ? text : undefined
    })
    expect(metrics).toContain("grove_gc_runs_total")
  }, 600_000)

  it("refuses an unknown option, and a data directory a running server holds", async () => {
    const refused = await run(SERVER_BIN, ["gc", "--no-such-option"])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain("grove-server gc:")
    const running = server ?? (server = await startServer({ dataDir, args: ["--gc-interval-seconds", "0"] }))
    const busy = await run(SERVER_BIN, ["gc", "--data-dir", running.dataDir], { timeoutMs: 120_000 })
    expect(busy.code).toBe(1)
    expect(busy.stderr).toContain("in use by a running grove-server")
  }, 300_000)
})
