/**
 * PostgreSQL, then Kafka, restarted under write load, in cluster mode: two nodes keep
 * their partition workers through the outage (none dies), requests during
 * the outage answer 503 retryable (never 401), and every one of the 32
 * command partitions serves writes again within 5 s of PostgreSQL being
 * ready, with no manual step. No acknowledged write is lost.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
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
import { type LoadTarget, recovery, repoPerPartition, startLoad } from "../support/PartitionLoad.ts"

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
  const target: LoadTarget = { nodes: () => nodes, key: () => key, owner: "pat", names }
  const load = startLoad(target, tag, 5000)
  await new Promise((r) => setTimeout(r, 1500))
  await outage()
  const times = await recovery(target, Date.now(), `after-${tag}`, Math.max(30_000, 2 * bound), 100)
  await load.stop()
  console.log(`${what}: every partition served again (${summary(times)}); load answers ${JSON.stringify([...load.statuses])}`)
  expect(Math.max(...times)).toBeLessThan(bound)
  await checkAfter(load.acknowledged)
}

describe("infrastructure restarted under load (cluster)", () => {
  const names = repoPerPartition("pat", PARTITIONS)

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
