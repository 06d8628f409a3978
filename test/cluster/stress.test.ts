/**
 * Correctness under concurrency, cluster mode: two nodes on real Kafka, PostgreSQL and S3; clients
 * push, sync, merge and revert on one repository through both nodes, and node A is SIGKILLed once
 * mid-run. The invariants of test/support/Workload.ts must hold on the survivor.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type ClusterInfra, startClusterInfra } from "../support/ClusterInfra.ts"
import { type GroveServer, run, SERVER_BIN, startServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"
import { checkInvariants, runWorkload } from "../support/Workload.ts"

let infra: ClusterInfra
let nodeA: GroveServer
let nodeB: GroveServer
let key: string

beforeAll(async () => {
  infra = await startClusterInfra()
  const created = await run(SERVER_BIN, ["user", "create", "sue"], { env: infra.env })
  expect(created.code, created.stderr).toBe(0)
  key = created.stdout.trim().split("\n").pop()!
  nodeA = await startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "15000" }, args: ["--node-id", "stress-a"] })
  nodeB = await startServer({ env: { ...infra.env, GROVE_COMMAND_TIMEOUT_MS: "15000" }, args: ["--node-id", "stress-b"] })
  const reply = await api(nodeA.url, key).post("/repos", { name: "busy" })
  expect([201, 202]).toContain(reply.status)
  for (let i = 0; i < 100 && (await api(nodeB.url, key).get("/sue/busy")).status !== 200; i++) await new Promise((r) => setTimeout(r, 200))
}, 600_000)

afterAll(async () => {
  await nodeA?.stop()
  await nodeB?.stop()
  await infra?.close()
})

describe("concurrency (cluster, a node killed mid-run)", () => {
  it("keeps main linear, every 200 merge on main once, every acknowledged push, no 500", async () => {
    let alive = [nodeA.url, nodeB.url]
    const outcomes = await runWorkload({
      urls: () => alive,
      token: key,
      owner: "sue",
      repo: "busy",
      clients: 6,
      rounds: 5,
      midway: {
        afterRounds: 2,
        action: async () => {
          nodeA.process.kill("SIGKILL")
          alive = [nodeB.url]
        }
      }
    })
    const result = await checkInvariants(nodeB.url, key, "sue", "busy", outcomes)
    expect(result.merges).toBeGreaterThan(5)
    const codes = outcomes.filter((o) => o.status !== 200).map((o) => `${o.op}:${o.status}:${o.body.code}`)
    console.log(`stress cluster: ${outcomes.length} requests, ${result.merges} merges, main length ${result.mainLength}, non-200: ${JSON.stringify(codes)}`)
  }, 400_000)
})
