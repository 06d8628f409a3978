/**
 * Garbage collection in cluster mode (Kafka, PostgreSQL, MinIO), running WHILE pushes run. Garbage is
 * made the real way: a repository pushed with `grove` and deleted, and chunks uploaded through the API
 * and never referenced. A first `grove-server gc` marks it; then pushes of fresh repositories run
 * back to back while `grove-server gc` runs back to back, and
 * one push carries, again, files of the deleted repository whose chunks are marked. Afterwards:
 * - the chunk rows are exactly the chunks the remaining repositories reach (nothing unreferenced is
 *   left, nothing referenced is missing), and every such chunk's object is in S3;
 * - the strays and the deleted repository's chunks that no push brought back are gone, rows and objects;
 * - every repository pushed during the runs clones back byte-identical.
 * Then gc's first race window, forced: a push command held (its repository row locked by the test) while
 * two gc runs with a 1 s grace drop its object list and sweep what it uploaded; released, the command refuses
 * the push (409 objects_missing) and `grove push` uploads again and lands it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Objects } from "@grove/core"
import { DbPostgres, ObjectStore, ObjectStoreS3 } from "@grove/storage"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as path from "node:path"
import { at, type GroveOptions, json, listing, ok, removeTempDirs, spawnGrove, tempDir } from "../cli/harness.ts"
import { type ClusterInfra, createClusterUser, startClusterInfra } from "../support/ClusterInfra.ts"
import { noise } from "../support/content.ts"
import { startRecordingProxy } from "../support/RecordingProxy.ts"
import { waitFor } from "../support/waitFor.ts"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"

const GRACE_SECONDS = 8

let infra: ClusterInfra
let node: GroveServer | undefined
let key: string
let greta: GroveOptions

beforeAll(async () => {
  infra = await startClusterInfra()
  key = await createClusterUser(infra, "greta")
  node = await startServer({
    env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "20000" },
    // Only the command's runs here, so their reports can be checked.
    args: ["--node-id", "gc-node", "--gc-interval-seconds", "0"]
  })
  greta = { home: tempDir("greta"), env: { SERVICE_API_KEY: key, GROVE_REMOTE: node.url } }
}, 600_000)

afterAll(async () => {
  await node?.stop()
  await infra?.close()
  removeTempDirs()
}, 300_000)

/** A checkout of `files` with one local commit, not pushed yet. */
const committed = async (name: string, files: Record<string, string | Uint8Array>) => {
  const work = tempDir(name)
  for (const [file, bytes] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(work, file)), { recursive: true })
    fs.writeFileSync(path.join(work, file), bytes)
  }
  const branch: string = json(await ok(["init", "--name", name, "--json"], at(greta, work))).branch
  await ok(["commit", "--json"], at(greta, work))
  return { name, work, branch }
}

const push = async <C extends { readonly work: string }>(checkout: C) => {
  await ok(["push", "--json"], at(greta, checkout.work))
  return checkout
}

const pushed = async (name: string, files: Record<string, string | Uint8Array>) => push(await committed(name, files))

const gc = async () => {
  const result = await run(SERVER_BIN, ["gc", "--json", "--gc-grace-seconds", String(GRACE_SECONDS)], { env: infra.env, timeoutMs: 240_000 })
  expect(result.code, result.stderr).toBe(0)
  return JSON.parse(result.stdout.trim().split("\n").at(-1)!) as { content: { freed: { chunks: number }; marked: { chunks: number } }; duration_ms: number }
}

const inCluster = <A>(effect: Effect.Effect<A, unknown, SqlClient.SqlClient | ObjectStore.ObjectStore>) =>
  Effect.runPromise(effect.pipe(
    Effect.provide(Layer.mergeAll(
      DbPostgres.layer({ url: infra.env.GROVE_DATABASE_URL!, maxConnections: 2 }),
      ObjectStoreS3.layer({
        endpoint: infra.env.GROVE_S3_ENDPOINT,
        region: infra.env.GROVE_S3_REGION!,
        bucket: infra.env.GROVE_S3_BUCKET!,
        accessKeyId: infra.env.GROVE_S3_ACCESS_KEY_ID!,
        secretAccessKey: infra.env.GROVE_S3_SECRET_ACCESS_KEY!
      })
    ))
  ))

describe("gc in cluster mode", () => {
  it("frees exactly the unreferenced objects while pushes run; every push clones back identical", async () => {
    const goneFiles: Record<string, Uint8Array> = {}
    for (let i = 0; i < 6; i++) goneFiles[`gone/${i}.bin`] = noise(8_000 + i * 100, 300 + i)
    await pushed("gone", goneFiles)
    const strays = [noise(7_000, 401), noise(7_500, 402)]
    for (const bytes of strays) {
      const response = await fetch(`${node!.url}/api/greta/gone/chunks/${Objects.Blake3.hash(bytes)}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/octet-stream" },
        body: bytes
      })
      expect(response.status, await response.text()).toBeLessThan(300)
    }
    await ok(["repo", "delete", "greta/gone", "--yes"], greta)
    const goneHashes = Object.values(goneFiles).map((b) => Objects.Blake3.hash(b))
    const strayHashes = strays.map((b) => Objects.Blake3.hash(b))
    // Two of the deleted repository's files come back in a push during the runs; the other four must go.
    const reborn = goneHashes.slice(0, 2)
    const doomed = [...goneHashes.slice(2), ...strayHashes]
    const doomedObjects = await inCluster(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ hash: string; pack: string | null }>`SELECT hash, pack FROM chunks WHERE hash = ANY(${doomed})`
      expect(rows.map((r) => r.hash).sort()).toEqual([...doomed].sort())
      // A pack holding a reborn chunk may stay (its row may be kept); only objects of doomed chunks alone are sure to go.
      const rebornPacks = yield* sql<{ pack: string | null }>`SELECT pack FROM chunks WHERE hash = ANY(${reborn})`
      const keep = new Set(rebornPacks.map((r) => r.pack))
      return [...new Set(rows.map((r) => r.pack ?? r.hash))].filter((o) => !keep.has(o))
    }))

    // Committed now and pushed right after the mark, so that it likely uploads those chunks again before the sweep.
    const rebornCheckout = await committed("reborn", { "a.bin": goneFiles["gone/0.bin"]!, "b.bin": goneFiles["gone/1.bin"]!, "new.txt": "reborn\n" })
    // Wait until the garbage is older than the grace, so that a run marks it.
    await new Promise((resolve) => setTimeout(resolve, GRACE_SECONDS * 1000))
    const first = await gc()
    expect(first.content.marked).toEqual({ blobs: 6, chunks: 8 })
    const markedAt = Date.now()

    // Pushes and gc at once: pushes go on until a gc run has swept (or a cap), gc runs back to back until the pushes end.
    const done: Array<{ name: string; work: string; branch: string }> = []
    let pushing = true
    let sweptChunks = 0
    let gcRuns = 0
    const gcMs: Array<number> = []
    const gcLoop = (async () => {
      while (pushing) {
        const report = await gc()
        gcRuns += 1
        gcMs.push(report.duration_ms)
        sweptChunks += report.content.freed.chunks
      }
    })()
    const pushLoop = (async () => {
      try {
        done.push(await push(rebornCheckout))
        for (let i = 0; i < 40 && (done.length < 4 || Date.now() - markedAt < (GRACE_SECONDS + 5) * 1000 || sweptChunks === 0); i++) {
          const files: Record<string, string | Uint8Array> = { "README.md": `push ${i}\n`, "data.bin": noise(9_000 + i, 500 + i) }
          for (let f = 0; f < 5; f++) files[`src/f${f}.txt`] = `push ${i} file ${f}\n`.repeat(50 + f)
          done.push(await pushed(`p${i}`, files))
        }
      } finally {
        pushing = false
      }
    })()
    await Promise.all([pushLoop, gcLoop])
    expect(gcRuns).toBeGreaterThan(1)
    // Quiesce: a run after the grace frees what the last runs marked.
    await new Promise((resolve) => setTimeout(resolve, GRACE_SECONDS * 1000))
    sweptChunks += (await gc()).content.freed.chunks
    // The 6 that no push brought back; and the 2 reborn ones too when a sweep came before their upload (stored anew then).
    console.log(`gc-cluster: ${done.length} pushes and ${gcRuns} gc runs at once over ${Math.round((Date.now() - markedAt) / 1000)} s; ` +
      `${sweptChunks} chunks swept in all; a run's own work took ${Math.min(...gcMs)}-${Math.max(...gcMs)} ms`)
    expect(sweptChunks).toBeGreaterThanOrEqual(doomed.length)
    expect(sweptChunks).toBeLessThanOrEqual(doomed.length + reborn.length)

    const state = await inCluster(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const store = yield* ObjectStore.ObjectStore
      const rows = yield* sql<{ org_id: string; hash: string; pack: string | null }>`SELECT org_id::text AS org_id, hash, pack FROM chunks`
      const reached = yield* sql<{ hash: string }>`SELECT DISTINCT bc.chunk_hash AS hash FROM blob_chunks bc
        JOIN blobs b ON b.org_id = bc.org_id AND b.hash = bc.blob_hash
        JOIN repo_blobs rb ON rb.blob_hash = b.hash JOIN repositories r ON r.id = rb.repo_id AND r.org_id = b.org_id`
      const objects = [...new Map(rows.map((r) => [`${r.org_id}/${r.pack ?? r.hash}`, { namespace: r.org_id, hash: r.pack ?? r.hash }])).values()]
      const missing = (yield* Effect.forEach(objects, (k) => Effect.map(store.has(k), (has) => has ? [] : [k.hash]), { concurrency: 8 })).flat()
      const org = rows[0]?.org_id ?? ""
      const doomedLeft = (yield* Effect.forEach(doomedObjects, (hash) => store.has({ namespace: org, hash }))).filter((has) => has).length
      return { rows: rows.map((r) => r.hash).sort(), reached: reached.map((r) => r.hash).sort(), missing, doomedLeft }
    }))
    expect(state.rows).toEqual(state.reached)
    expect(state.missing).toEqual([])
    for (const hash of doomed) expect(state.rows).not.toContain(hash)
    for (const hash of reborn) expect(state.rows).toContain(hash)
    expect(state.doomedLeft).toBe(0)

    for (const push of done) {
      const parent = tempDir(`clone-${push.name}`)
      await ok(["clone", `greta/${push.name}`, "copy", "--branch", push.branch], at(greta, parent))
      expect({ push: push.name, files: listing(path.join(parent, "copy")) }).toEqual({ push: push.name, files: listing(push.work) })
    }
  }, 900_000)

  it("a push command held past two gc runs is refused, and grove uploads again: the branch clones identical", async () => {
    const proxy = await startRecordingProxy(node!.url)
    const viaProxy: GroveOptions = { ...greta, env: { ...greta.env, GROVE_REMOTE: proxy.url } }
    try {
      const work = tempDir("held")
      fs.writeFileSync(path.join(work, "first.txt"), "first\n")
      const branch: string = json(await ok(["init", "--name", "held", "--json"], at(viaProxy, work))).branch
      await ok(["commit", "--json"], at(viaProxy, work))
      await ok(["push", "--json"], at(viaProxy, work))
      fs.writeFileSync(path.join(work, "held.bin"), noise(12_000, 901))
      fs.writeFileSync(path.join(work, "held.txt"), "held on the bus\n".repeat(40))
      await ok(["commit", "--json"], at(viaProxy, work))
      proxy.take()
      // The push command takes its repository's row FOR UPDATE: held here (FOR NO KEY UPDATE lets the
      // preparation's inserts through), the command waits after the push was prepared.
      const release = Promise.withResolvers<void>()
      const locked = Promise.withResolvers<void>()
      const holder = inCluster(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT r.id FROM repositories r JOIN organizations o ON o.id = r.org_id
            WHERE o.slug = 'greta' AND r.name = 'held' FOR NO KEY UPDATE OF r`
          locked.resolve()
          yield* Effect.promise(() => release.promise)
        }))
      }))
      await Promise.race([locked.promise, holder])
      const pushing = spawnGrove(["push", "--json"], at(viaProxy, work), 300_000)
      try {
        await waitFor("the push command waiting on the repository row", () =>
          inCluster(Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            const rows = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND query ILIKE '%FROM repositories r%FOR UPDATE OF r%'`
            return rows[0]?.n === "0" ? undefined : true
          })), 120_000)
        // Grace 1 s (the least): once the push's rows are older, the first run drops its object list and marks
        // what it uploaded, and a run a grace after the mark sweeps it. (The waits make the rows old enough.)
        for (let i = 0; i < 2; i++) {
          await new Promise((resolve) => setTimeout(resolve, 1_500))
          const result = await run(SERVER_BIN, ["gc", "--json", "--gc-grace-seconds", "1"], { env: infra.env, timeoutMs: 240_000 })
          expect(result.code, result.stderr).toBe(0)
        }
        const swept = await inCluster(Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ hash: string }>`SELECT hash FROM chunks WHERE hash = ${Objects.Blake3.hash(noise(12_000, 901))}`
        }))
        expect(swept).toEqual([])
      } finally {
        release.resolve()
        await holder
      }
      const result = await pushing.done
      expect(result.code, result.stderr).toBe(0)
      // Two publications: the refused one (answered 409, or 202 and an operation that failed 409) and the one after the re-upload.
      const pushes = proxy.take().filter((r) => r.method === "POST" && r.path.endsWith("/push"))
      expect(pushes.length).toBe(2)
      expect(pushes.at(-1)!.status).toBe(200)
      const parent = tempDir("clone-held")
      await ok(["clone", "greta/held", "copy", "--branch", branch], at(greta, parent))
      expect(listing(path.join(parent, "copy"))).toEqual(listing(work))
      const fsck = await run(SERVER_BIN, ["fsck", "--json"], { env: infra.env, timeoutMs: 240_000 })
      expect(fsck.code, fsck.stdout + fsck.stderr).toBe(0)
    } finally {
      await proxy.close()
    }
  }, 600_000)
})
