/**
 * Cluster mode end to end: two grove-server nodes on one real Kafka broker,
 * PostgreSQL and S3. Repository creates sent to either node are applied once,
 * by the owner of the repository's partition; when a node is killed during a
 * stream of creates, every acknowledged create exists exactly once and the
 * survivor serves the rest.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { startTwoNodes, type TwoNodes } from "../support/ClusterInfra.ts"
import type { GroveServer } from "../support/GroveServer.ts"
import { api } from "../support/http.ts"

let cluster: TwoNodes
let nodeA: GroveServer
let nodeB: GroveServer
let key: string

beforeAll(async () => {
  cluster = await startTwoNodes("ann", 5000)
  ;({ nodeA, nodeB, key } = cluster)
}, 600_000)

afterAll(async () => {
  await cluster?.stop()
})

/** Polls an operation until it is done and returns it. */
const settle = async (node: GroveServer, operationId: string) => {
  const deadline = Date.now() + 60_000
  for (;;) {
    const op = await api(node.url, key).get(`/operations/${encodeURIComponent(operationId)}`)
    expect(op.status).toBe(200)
    if (op.body.status === "done") return op.body
    expect(Date.now()).toBeLessThan(deadline)
    await new Promise((r) => setTimeout(r, 200))
  }
}

const listNames = async (node: GroveServer) =>
  ((await api(node.url, key).get("/repos?sort=name")).body.repos as Array<{ name: string }>).map((r) => r.name)

describe("cluster mode", () => {
  it("applies creates sent to either node exactly once, and both nodes read them", async () => {
    const names = Array.from({ length: 24 }, (_, i) => `spread-${String(i).padStart(2, "0")}`)
    const replies = await Promise.all(
      names.map((name, i) => api((i % 2 === 0 ? nodeA : nodeB).url, key).post("/repos", { name }))
    )
    // Right after a node joins, partitions may still be moving: a create that outlives the command
    // timeout answers 202, and its operation must then settle as the 201 it would have been.
    for (const reply of replies) {
      if (reply.status === 202) {
        expect((await settle(nodeA, reply.body.operation_id)).http_status).toBe(201)
      } else {
        expect(reply.status, JSON.stringify(reply.body)).toBe(201)
      }
    }
    // The same name again, through the other node: the partition owner refuses it.
    const dup = await api(nodeB.url, key).post("/repos", { name: "spread-00" })
    expect(dup.status).toBe(409)
    for (const node of [nodeA, nodeB]) {
      const listed = (await listNames(node)).filter((n) => n.startsWith("spread-"))
      expect(listed).toEqual(names)
    }
    const version = await api(nodeB.url).get("/version")
    expect(version.body.mode).toBe("cluster")
  }, 120_000)

  it("keeps every acknowledged create when a node is killed mid-stream; the survivor serves the rest", async () => {
    const total = 40
    const names = Array.from({ length: total }, (_, i) => `kill-${String(i).padStart(2, "0")}`)
    const acknowledged = new Set<string>()
    const attempt = async (name: string, url: string) => {
      try {
        const reply = await api(url, key).post("/repos", { name }, { "idempotency-key": `create-${name}` })
        if (reply.status === 201) acknowledged.add(name)
        return reply.status
      } catch {
        return 0 // connection refused or reset: the node is gone
      }
    }
    // Stream creates at both nodes; kill node A a third of the way through.
    const firstWave = names.map((name, i) => async () => {
      if (i === Math.floor(total / 3)) nodeA.process.kill("SIGKILL")
      return attempt(name, (i % 2 === 0 ? nodeA : nodeB).url)
    })
    for (const send of firstWave) await send()
    // Whatever was not acknowledged is retried at the survivor with the same idempotency key.
    const deadline = Date.now() + 90_000
    for (const name of names) {
      while (!acknowledged.has(name)) {
        const status = await attempt(name, nodeB.url)
        if (status === 201) break
        // An earlier attempt that was applied but whose answer was lost replays as 201 (same key),
        // never as 409; while partitions move, the survivor may answer 202 or 503.
        expect([0, 202, 503]).toContain(status)
        expect(Date.now()).toBeLessThan(deadline)
        await new Promise((r) => setTimeout(r, 500))
      }
    }
    expect(acknowledged.size).toBe(total)
    const listed = (await listNames(nodeB)).filter((n) => n.startsWith("kill-"))
    // Exactly once each: no duplicates, nothing missing.
    expect(listed).toEqual(names)
  }, 300_000)
})
