/**
 * Webhooks in cluster mode, on two nodes: node A is killed (SIGKILL) while events stream in, so
 * the fan-out and the delivery workers it was running die mid-stream. Every event still reaches
 * the receiver at least once, and exactly once counted by delivery id; deliveries keep flowing
 * through node B meanwhile; the delivery topic reads with the stock kcat.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { startTwoNodes, type TwoNodes } from "../support/ClusterInfra.ts"
import { buildCommit, pushBody } from "../support/content.ts"
import { type GroveServer, startServer } from "../support/GroveServer.ts"
import { api, settleReply } from "../support/http.ts"
import { waitFor } from "../support/waitFor.ts"
import { opensslHmac, type Receiver, startReceiver } from "../support/WebhookReceiver.ts"

const exec = promisify(execFile)
const ENV = { GROVE_UNSAFE_EGRESS_ALLOW: "127.0.0.1", GROVE_WEBHOOK_RETRY_BASE_MS: "500" }

let cluster: TwoNodes
let nodeA: GroveServer
let nodeB: GroveServer
let key: string
let receiver: Receiver
const restarted: Array<GroveServer> = []

beforeAll(async () => {
  receiver = await startReceiver()
  cluster = await startTwoNodes("wanda", 15000, ENV)
  ;({ nodeA, nodeB, key } = cluster)
  expect((await api(nodeA.url, key).post("/repos", { name: "hooked" })).status).toBe(201)
}, 600_000)

afterAll(async () => {
  for (const node of restarted) await node.stop()
  await cluster?.stop()
  await receiver?.close()
})

describe("webhooks on two nodes", () => {
  it("delivers every event at least once, and once by delivery id, although a node dies mid-stream", async () => {
    const hook = await api(nodeB.url, key).post("/wanda/hooked/webhooks", { url: `http://127.0.0.1:${receiver.port}/hook`, secret: "s3cret-value" })
    expect(hook.status, JSON.stringify(hook.body)).toBe(201)
    // Some deliveries fail once, so retries are in flight when the node dies.
    receiver.failFirst("/hook", 3, 502)
    const total = 24
    const branches: Array<string> = []
    for (let i = 0; i < total; i++) {
      const branch = `b-${i}`
      branches.push(branch)
      const c = buildCommit({ branch, files: { [`f${i}.txt`]: `${i}\n` } })
      // A push may answer 202 pending while the killed node's partitions move to node B: its outcome counts.
      const pushed = await settleReply(await api(nodeB.url, key).post("/wanda/hooked/push", pushBody({ branch, commits: [c], description: branch })), () => [nodeB.url], key)
      expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
      if (i === total / 3) nodeA.process.kill("SIGKILL")
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    // Node B keeps delivering while A is gone.
    const deliveredWhileDown = await waitFor("deliveries through node B", async () => {
      const seen = new Set(receiver.received.filter((r) => r.headers["x-service-event"] === "branch.created").map((r) => JSON.parse(r.raw.toString()).branch))
      return seen.size >= total / 2 ? seen.size : undefined
    }, 120_000)
    expect(deliveredWhileDown).toBeGreaterThanOrEqual(total / 2)
    nodeA = await startServer({ env: { ...cluster.infra.env, GROVE_COMMAND_TIMEOUT_MS: "15000", ...ENV }, args: ["--node-id", "node-a"] })
    restarted.push(nodeA)
    await waitFor("every event at the receiver", async () => {
      const ok = receiver.received.filter((r) => r.headers["x-service-event"] === "branch.created")
      const seen = new Set(ok.map((r) => JSON.parse(r.raw.toString()).branch))
      return branches.every((b) => seen.has(b)) ? true : undefined
    }, 120_000)
    const created = receiver.received.filter((r) => r.headers["x-service-event"] === "branch.created")
    // One delivery id per event: duplicates (a retry, a replay after the kill) carry the same id.
    const idsPerBranch = new Map<string, Set<string>>()
    for (const request of created) {
      const branch = JSON.parse(request.raw.toString()).branch as string
      idsPerBranch.set(branch, (idsPerBranch.get(branch) ?? new Set()).add(String(request.headers["x-service-delivery-id"])))
      expect(request.headers["x-service-signature-256"]).toBe(opensslHmac("s3cret-value", request.raw))
    }
    expect([...idsPerBranch.values()].every((ids) => ids.size === 1)).toBe(true)
    console.log(`webhooks across a node kill: ${total} events, ${created.length} requests, ${idsPerBranch.size} delivery ids`)

    // An operator reads the delivery topic with kcat.
    const { stdout } = await exec("kcat", ["-C", "-b", cluster.infra.kafkaBootstrap, "-t", "grove.webhook-deliveries", "-o", "beginning", "-e", "-q"], { timeout: 60_000 })
    const notices = stdout.trim().split("\n").map((line) => JSON.parse(line))
    expect(notices.length).toBeGreaterThanOrEqual(total)
    expect(notices[0]).toMatchObject({ type: "webhook.delivery", v: 1, webhook_id: hook.body.id })
  }, 400_000)
})
