/**
 * One trace across two cluster nodes (real Kafka, PostgreSQL and S3), exported to a local OTLP/HTTP
 * receiver written for the test (test/support/OtlpReceiver.ts): a merge sent to the node that does NOT
 * own the repository's command partition is one trace from that node's HTTP server span and its
 * `EntityRuntime.send`, over Kafka (the record's `traceparent` header), to the owner's
 * `EntityRuntime.command`, its `sql.transaction` and its `EntityRuntime.reply`, each span naming its
 * node in the resource's `service.instance.id`.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Murmur2 } from "@grove/bus"
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { startTwoNodes, type TwoNodes } from "../support/ClusterInfra.ts"
import { buildCommit, pushBody } from "../support/content.ts"
import { api } from "../support/http.ts"
import { lineage, type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../support/OtlpReceiver.ts"
import { waitFor } from "../support/waitFor.ts"

const exec = promisify(execFile)
const COMMAND_PARTITIONS = 32

let receiver: OtlpReceiver
let cluster: TwoNodes

beforeAll(async () => {
  receiver = await startOtlpReceiver()
  cluster = await startTwoNodes("tess", 30_000, { GROVE_OTLP_ENDPOINT: receiver.url })
}, 600_000)

afterAll(async () => {
  await cluster?.stop()
  await receiver?.close()
})

const psql = async (query: string) =>
  (await exec("psql", [cluster.infra.databaseUrl, "-v", "ON_ERROR_STOP=1", "-qtAc", query])).stdout.trim()

/** Which node holds each command partition, as the partitions' fence rows say. */
const owners = async () =>
  new Map((await psql("SELECT partition, owner FROM partition_epochs WHERE topic = 'grove.commands'"))
    .split("\n").filter((l) => l !== "").map((l) => {
      const [partition, owner] = l.split("|")
      return [Number(partition), owner!] as const
    }))

const instance = (span: ReceivedSpan) => span.resource["service.instance.id"]

describe("traces across nodes", () => {
  it("follow a merge from node A's HTTP request over Kafka into node B's command transaction and back", async () => {
    const { nodeA, nodeB, key } = cluster
    // Both nodes serve, and every partition has settled on one of them (the same owners twice, a second apart).
    const settled = await waitFor("both nodes ready and the partitions settled", async () => {
      for (const node of [nodeA, nodeB]) if ((await fetch(`${node.url}/readyz`)).status !== 200) return undefined
      const first = await owners()
      await new Promise((resolve) => setTimeout(resolve, 1000))
      const second = await owners()
      const stable = first.size === COMMAND_PARTITIONS && [...first].every(([p, o]) => second.get(p) === o)
      return stable && new Set(first.values()).size === 2 ? second : undefined
    }, 180_000)
    // A repository whose command partition node B owns; the writes all go to node A.
    const name = Array.from({ length: 200 }, (_, i) => `traced-${i}`)
      .find((n) => settled.get(Murmur2.partitionFor(`tess/${n}`, COMMAND_PARTITIONS)) === "node-b")!
    expect(name).toBeDefined()
    const created = await api(nodeA.url, key).post("/repos", { name })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const c1 = buildCommit({ branch: "topic", files: { "README.md": "traced across nodes\n" } })
    const pushed = await api(nodeA.url, key).post(`/tess/${name}/push`, pushBody({ branch: "topic", commits: [c1], description: "Traced" }))
    expect(pushed.body.success, JSON.stringify(pushed.body)).toBe(true)
    const merged = await api(nodeA.url, key).post(`/tess/${name}/branches/topic/merge`)
    expect(merged.status, JSON.stringify(merged.body)).toBe(200)

    const found = await waitFor("the merge's trace with the owner's command transaction", async () => {
      const all = receiver.spans()
      const request = all.find((s) =>
        s.kind === 2 && s.attributes["http.route"] === "/api/:owner/:name/branches/:branch/merge" && instance(s) === "node-a"
      )
      if (request === undefined) return undefined
      const trace = all.filter((s) => s.traceId === request.traceId)
      const transaction = trace.find((s) => s.name === "sql.transaction" && lineage(trace, s).some((a) => a.name === "EntityRuntime.command"))
      const reply = trace.find((s) => s.name === "EntityRuntime.reply")
      return transaction === undefined || reply === undefined ? undefined : { request, trace, transaction, reply }
    }, 90_000)

    // transaction (B) <- command (B) <- send (A) <- ... <- HTTP server span (A): one trace, two nodes.
    const line = lineage(found.trace, found.transaction)
    const at = (name: string) => line.findIndex((s) => s.name === name)
    const command = line[at("EntityRuntime.command")]!
    const send = line[at("EntityRuntime.send")]!
    expect(at("EntityRuntime.send"), line.map((s) => s.name).join(" <- ")).toBe(at("EntityRuntime.command") + 1)
    expect(line[line.length - 1]).toBe(found.request)
    expect(instance(found.transaction)).toBe("node-b")
    expect(instance(command)).toBe("node-b")
    expect(instance(send)).toBe("node-a")
    expect(instance(found.request)).toBe("node-a")
    expect(command.attributes).toMatchObject({
      "grove.command": "Merge",
      "grove.node": "node-b",
      "messaging.destination.partition.id": String(Murmur2.partitionFor(`tess/${name}`, COMMAND_PARTITIONS))
    })
    expect(send.attributes["grove.command_id"]).toBe(command.attributes["grove.command_id"])
    // ... and back: node B's reply is sent inside the command's span, and node A's send span ends only after
    // that began (the reply's own span ends once Kafka acknowledged it, which may be after node A has it).
    expect(found.reply.parentSpanId).toBe(command.spanId)
    expect(instance(found.reply)).toBe("node-b")
    expect(BigInt(found.reply.startTimeUnixNano)).toBeLessThan(BigInt(send.endTimeUnixNano))
    expect(new Set(found.trace.map(instance))).toEqual(new Set(["node-a", "node-b"]))
    expect(receiver.rejected()).toEqual([])
    console.log(`the merge's trace: ${found.trace.length} spans; ${line.map((s) => `${s.name}@${instance(s)}`).join(" <- ")}`)
  }, 300_000)
})
