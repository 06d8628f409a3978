/**
 * PostgreSQL, then Kafka, restarted under write load, in cluster mode: two nodes keep
 * their partition workers through the outage (none dies), requests during
 * the outage answer 503 retryable (never 401), and every one of the 32
 * command partitions serves writes again within 5 s of PostgreSQL being
 * ready, with no manual step. No acknowledged write is lost.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Murmur2 } from "@grove/bus"
import { Effect, Exit, Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { clusterEnv } from "../../scripts/infra/clusterEnv.ts"
import { startKafka } from "../../scripts/infra/kafka.ts"
import { type PostgresServer, startPostgres } from "../../scripts/infra/postgres.ts"
import { freePort } from "../../scripts/infra/process.ts"
import { type S3Server, startS3 } from "../../scripts/infra/s3.ts"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

const PARTITIONS = 32
const pgDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-pg-restart-"))
const kafkaDir = fs.mkdtempSync(path.join(os.tmpdir(), "grove-kafka-restart-"))
let kafkaPorts: { port: number; controllerPort: number }
let kafkaScope: Scope.Closeable
let pgPort: number
let pgScope: Scope.Closeable
let pg: PostgresServer
let s3Scope: Scope.Closeable
let s3: S3Server
let env: NodeJS.ProcessEnv
let nodes: Array<GroveServer> = []
let key: string

const startPg = async () => {
  pgScope = Effect.runSync(Scope.make())
  // Durable settings (as `npm run cluster` uses): an immediate stop must lose no acknowledged write.
  pg = await Effect.runPromise(Scope.provide(startPostgres({ dataDir: pgDir, port: pgPort, durable: true }), pgScope))
}
const stopPg = () => Effect.runPromise(Scope.close(pgScope, Exit.void))
/** A broker of this suite's own (on its data dir and ports), so restarting it disturbs no other suite. */
const startBroker = async () => {
  kafkaScope = Effect.runSync(Scope.make())
  return Effect.runPromise(Scope.provide(startKafka({ dataDir: kafkaDir, ...kafkaPorts }), kafkaScope))
}
const stopBroker = () => Effect.runPromise(Scope.close(kafkaScope, Exit.void))

/** One repository name per command partition (the Repository entity key is `owner/name`). */
const repoPerPartition = (owner: string): Array<string> => {
  const names: Array<string | undefined> = Array.from({ length: PARTITIONS }, () => undefined)
  let found = 0
  for (let i = 0; found < PARTITIONS; i++) {
    const name = `p-${i}`
    const partition = Murmur2.partitionFor(`${owner}/${name}`, PARTITIONS)
    if (names[partition] === undefined) {
      names[partition] = name
      found++
    }
  }
  return names as Array<string>
}

beforeAll(async () => {
  pgPort = await Effect.runPromise(freePort())
  kafkaPorts = { port: await Effect.runPromise(freePort()), controllerPort: await Effect.runPromise(freePort()) }
  const kafka = await startBroker()
  await startPg()
  s3Scope = Effect.runSync(Scope.make())
  s3 = await Effect.runPromise(Scope.provide(startS3(), s3Scope))
  env = {
    ...clusterEnv(kafka, pg, s3),
    GROVE_KAFKA_PREFIX: `pg-restart-${randomUUID().slice(0, 8)}.`,
    GROVE_COMMAND_TIMEOUT_MS: "20000"
  }
  const created = await run(SERVER_BIN, ["user", "create", "pat", "--admin"], { env })
  expect(created.code, created.stderr).toBe(0)
  key = created.stdout.trim().split("\n").pop()!
  nodes = [
    await startServer({ env, args: ["--node-id", "pg-a"] }),
    await startServer({ env, args: ["--node-id", "pg-b"] })
  ]
}, 600_000)

afterAll(async () => {
  for (const node of nodes) await node.stop()
  if (pgScope !== undefined) await stopPg()
  if (s3Scope !== undefined) await Effect.runPromise(Scope.close(s3Scope, Exit.void))
  if (kafkaScope !== undefined) await stopBroker()
  fs.rmSync(pgDir, { recursive: true, force: true })
  fs.rmSync(kafkaDir, { recursive: true, force: true })
})

/** A bounded write load through both nodes (branch creates over every partition) until `stop()`. */
const startLoad = (names: ReadonlyArray<string>, tag: string) => {
  const acknowledged: Array<{ readonly repo: string; readonly branch: string }> = []
  const statuses = new Map<number, number>()
  let stopped = false
  let seq = 0
  const workers = Array.from({ length: 4 }, async (_, worker) => {
    while (!stopped && seq < 5000) {
      const n = seq++
      const repo = names[n % PARTITIONS]!
      const branch = `${tag}-${worker}-${n}`
      const reply = await api(nodes[n % 2]!.url, key).post(`/pat/${repo}/branches`, { name: branch }).catch(() => undefined)
      if (reply === undefined) continue
      statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1)
      if (reply.status === 201) acknowledged.push({ repo, branch })
      else expect([202, 503], JSON.stringify(reply.body)).toContain(reply.status)
      if (reply.status === 503) {
        expect(reply.body.retryable, JSON.stringify(reply.body)).toBe(true)
        await new Promise((r) => setTimeout(r, 100))
      }
    }
  })
  return {
    acknowledged,
    statuses,
    stop: async () => {
      stopped = true
      await Promise.all(workers)
    }
  }
}

/** Per partition, how long after `readyAt` a write through either node first succeeded. */
const recovery = (names: ReadonlyArray<string>, readyAt: number, tag: string, within: number) =>
  Promise.all(names.map(async (repo, partition) => {
    for (let attempt = 0;; attempt++) {
      const reply = await api(nodes[partition % 2]!.url, key)
        .post(`/pat/${repo}/branches`, { name: `${tag}-${attempt}` })
        .catch(() => undefined)
      if (reply?.status === 201) return Date.now() - readyAt
      if (Date.now() - readyAt > within) return Number.POSITIVE_INFINITY
      await new Promise((r) => setTimeout(r, 100))
    }
  }))

const summary = (times: ReadonlyArray<number>) =>
  `slowest ${Math.max(...times)} ms, median ${[...times].sort((a, b) => a - b)[PARTITIONS / 2]} ms`

/** Both nodes ready, and every acknowledged write readable. */
const checkAfter = async (acknowledged: ReadonlyArray<{ readonly repo: string; readonly branch: string }>) => {
  for (const node of nodes) {
    const health = await api(node.url).get("/health")
    expect(health.status, JSON.stringify(health.body)).toBe(200)
  }
  for (const { repo, branch } of acknowledged) {
    const read = await api(nodes[0]!.url, key).get(`/pat/${repo}/branches/${branch}`)
    expect(read.status, `${repo}:${branch}`).toBe(200)
  }
  expect(acknowledged.length).toBeGreaterThan(0)
}

/**
 * Under load: `outage` stops a dependency and starts it again; then every partition must take a write within
 * `bound` ms of the dependency being back, and every acknowledged write must be there.
 */
const restartUnderLoad = async (
  names: ReadonlyArray<string>,
  what: string,
  tag: string,
  outage: () => Promise<void>,
  bound: number
) => {
  const load = startLoad(names, tag)
  await new Promise((r) => setTimeout(r, 1500))
  await outage()
  const times = await recovery(names, Date.now(), `after-${tag}`, Math.max(30_000, 2 * bound))
  await load.stop()
  console.log(`${what}: every partition served again (${summary(times)}); load answers ${JSON.stringify([...load.statuses])}`)
  expect(Math.max(...times)).toBeLessThan(bound)
  await checkAfter(load.acknowledged)
}

describe("infrastructure restarted under load (cluster)", () => {
  const names = repoPerPartition("pat")

  it("PostgreSQL: every partition serves again within 5 s of it being ready; nothing acknowledged is lost", async () => {
    for (const [i, name] of names.entries()) {
      const created = await api(nodes[i % 2]!.url, key).post("/repos", { name })
      expect(created.status, JSON.stringify(created.body)).toBe(201)
    }
    // PostgreSQL's fast shutdown (SIGINT), down for a few seconds, then started again on its data.
    await restartUnderLoad(names, "PostgreSQL restart", "pg", async () => {
      await stopPg()
      const down = await api(nodes[0]!.url, key).get("/repos")
      expect(down.status).toBe(503)
      expect(down.body.retryable).toBe(true)
      await new Promise((r) => setTimeout(r, 4000))
      await startPg()
    }, 5000)
  }, 300_000)

  it("PostgreSQL stopped immediately (SIGQUIT): the same, and no acknowledged write is lost", async () => {
    await restartUnderLoad(names, "PostgreSQL SIGQUIT", "pgquit", async () => {
      process.kill(pg.pid, "SIGQUIT")
      await stopPg()
      await new Promise((r) => setTimeout(r, 3000))
      await startPg()
    }, 5000)
  }, 300_000)

  it("Kafka: every partition serves again after the broker is back; nothing acknowledged is lost", async () => {
    await restartUnderLoad(names, "Kafka restart", "kafka", async () => {
      await stopBroker()
      await new Promise((r) => setTimeout(r, 4000))
      await startBroker()
    }, 60_000)
  }, 300_000)
})
