/**
 * Benchmark: webhook deliveries to receivers on 127.0.0.1 (through the test allow-list), each
 * number beside a baseline measured in the same run:
 *   - event to receiver: a push's event timestamp until the receiver has the request, p50/p99,
 *     embedded and (with --kafka) on a two-node cluster, against a direct POST to the same receiver;
 *   - deliveries per second to one receiver and to 50 receivers (50 webhooks on one repository);
 *   - what one slow receiver (5 s answers) does to the p99 of the 10 others, against none slow.
 *
 *   npm run bench:webhooks [-- --events 40 --kafka]
 */
import * as http from "node:http"
import { createClusterUser, startClusterInfra } from "../../test/support/ClusterInfra.ts"
import { buildCommit, pushBody } from "../../test/support/content.ts"
import { type GroveServer, startServer } from "../../test/support/GroveServer.ts"
import { api } from "../../test/support/http.ts"
import { startReceiver } from "../../test/support/WebhookReceiver.ts"
import { numberArg } from "./load.ts"
import { type Measure, percentile } from "./table/measure.ts"

const EVENTS = numberArg("events", 40)
const KAFKA = process.argv.includes("--kafka")
const ENV = { GROVE_UNSAFE_EGRESS_ALLOW: "127.0.0.1", GROVE_WEBHOOK_RETRY_BASE_MS: "1000" }

const ms = (n: number) => `${n.toFixed(1).padStart(7)} ms`
const sleep = (n: number) => new Promise((resolve) => setTimeout(resolve, n))

let pushes = 0
const pushEvent = async (as: ReturnType<typeof api>, repo: string) => {
  const branch = `b-${++pushes}`
  const c = buildCommit({ branch, files: { [`f${pushes}.txt`]: `${pushes}\n` } })
  const reply = await as.post(`/bench/${repo}/push`, pushBody({ branch, commits: [c], description: branch }))
  if (reply.body.success !== true) throw new Error(JSON.stringify(reply.body))
  return branch
}

export interface LatencyResult {
  /** Event timestamp to the receiver having the request, ms, per event. */
  readonly delays: ReadonlyArray<number>
  /** The baseline: a direct POST to the same receiver, ms. */
  readonly direct: ReadonlyArray<number>
}

/** Event-to-receiver latency over `events` pushes, one at a time. */
const measureLatency = async (server: GroveServer, key: string, label: string, events = EVENTS): Promise<LatencyResult> => {
  const as = api(server.url, key)
  const receiver = await startReceiver()
  await as.post("/repos", { name: `lat-${label}` })
  await as.post(`/bench/lat-${label}/webhooks`, { url: `http://127.0.0.1:${receiver.port}/lat`, events: ["branch.created"] })
  const delays: Array<number> = []
  for (let i = 0; i < events; i++) {
    const before = receiver.received.length
    await pushEvent(as, `lat-${label}`)
    while (receiver.received.length === before) await sleep(2)
    const request = receiver.received[receiver.received.length - 1]!
    delays.push(request.at - new Date(JSON.parse(request.raw.toString()).timestamp).getTime())
  }
  // The baseline: the same receiver, POSTed to directly.
  const direct: Array<number> = []
  for (let i = 0; i < events; i++) {
    // Sub-millisecond clock: a direct POST takes about a millisecond, Date.now() would round it away.
    const t0 = performance.now()
    await new Promise<void>((resolve) => http.request({ host: "127.0.0.1", port: receiver.port, path: "/direct", method: "POST" }, (r) => r.resume().on("end", resolve)).end("{}"))
    direct.push(performance.now() - t0)
  }
  await receiver.close()
  return { delays, direct }
}

const latency = async (server: GroveServer, key: string, label: string) => {
  const { delays, direct } = await measureLatency(server, key, label)
  console.log(`event -> receiver (${label.padEnd(8)}) p50 ${ms(percentile(delays, 0.5))}  p99 ${ms(percentile(delays, 0.99))}`)
  console.log(`  baseline: direct POST         p50 ${ms(percentile(direct, 0.5))}  p99 ${ms(percentile(direct, 0.99))}`)
}

/** The table's part: event to receiver on one embedded server. */
export const measureWebhooks = async (events: number): Promise<LatencyResult> => {
  const server = await startServer({ env: ENV })
  try {
    return await measureLatency(server, await server.createUser("bench"), "embedded", events)
  } finally {
    await server.stop()
  }
}

export const webhookMeasures = (r: LatencyResult): Array<Measure> => [{
  id: "webhook.embedded",
  name: "webhook event -> receiver p50, embedded",
  value: percentile(r.delays, 0.5),
  unit: "ms",
  baselineName: "direct POST to the receiver",
  baseline: percentile(r.direct, 0.5),
  better: "lower",
  goal: "< 50 ms",
  met: percentile(r.delays, 0.5) < 50,
  samples: { value: r.delays, baseline: r.direct },
  detail: `p99 ${percentile(r.delays, 0.99).toFixed(1)} ms over ${r.delays.length} events (Kafka: npm run bench:webhooks -- --kafka)`
}]

const throughput = async (server: GroveServer, key: string, receivers: number) => {
  const as = api(server.url, key)
  const receiver = await startReceiver()
  const repo = `tp-${receivers}`
  await as.post("/repos", { name: repo })
  for (let i = 0; i < receivers; i++) await as.post(`/bench/${repo}/webhooks`, { url: `http://127.0.0.1:${receiver.port}/r${i}`, events: ["branch.created"] })
  const events = receivers === 1 ? EVENTS * 2 : Math.max(4, Math.round(EVENTS / 4))
  const t0 = performance.now()
  for (let i = 0; i < events; i++) await pushEvent(as, repo)
  const pushed = performance.now()
  while (receiver.received.length < events * receivers) await sleep(5)
  const seconds = (performance.now() - t0) / 1000
  await receiver.close()
  console.log(`deliveries/s to ${String(receivers).padStart(2)} receiver(s) ${(events * receivers / seconds).toFixed(0).padStart(7)}   (${events * receivers} deliveries of ${events} events; pushing took ${((pushed - t0) / 1000).toFixed(1)} s)`)
}

const slowNeighbour = async (server: GroveServer, key: string) => {
  const as = api(server.url, key)
  const measure = async (slow: boolean) => {
    const receiver = await startReceiver()
    const repo = `slow-${slow}`
    await as.post("/repos", { name: repo })
    if (slow) {
      receiver.slow("/slow", 5000)
      await as.post(`/bench/${repo}/webhooks`, { url: `http://127.0.0.1:${receiver.port}/slow`, events: ["branch.created"] })
    }
    for (let i = 0; i < 10; i++) await as.post(`/bench/${repo}/webhooks`, { url: `http://127.0.0.1:${receiver.port}/fast${i}`, events: ["branch.created"] })
    const events = Math.max(4, Math.round(EVENTS / 4))
    for (let i = 0; i < events; i++) await pushEvent(as, repo)
    while (receiver.received.filter((r) => r.path.startsWith("/fast")).length < events * 10) await sleep(5)
    const delays = receiver.received.filter((r) => r.path.startsWith("/fast")).map((r) => r.at - new Date(JSON.parse(r.raw.toString()).timestamp).getTime())
    await receiver.close()
    return percentile(delays, 0.99)
  }
  const without = await measure(false)
  const withSlow = await measure(true)
  console.log(`others' p99, one slow (5 s)  ${ms(withSlow)}`)
  console.log(`  baseline: none slow        ${ms(without)}   ratio ${(withSlow / without).toFixed(2)}x`)
}

const main = async () => {
  console.log(`webhook benchmark: ${EVENTS} events per latency run\n`)
  const server = await startServer({ env: ENV })
  try {
    const key = await server.createUser("bench")
    await latency(server, key, "embedded")
    await throughput(server, key, 1)
    await throughput(server, key, 50)
    await slowNeighbour(server, key)
  } finally {
    await server.stop()
  }
  if (KAFKA) {
    const infra = await startClusterInfra()
    const nodes: Array<GroveServer> = []
    try {
      const key = await createClusterUser(infra, "bench")
      for (const name of ["bench-a", "bench-b"]) nodes.push(await startServer({ env: { ...infra.env, ...ENV }, args: ["--node-id", name] }))
      await latency(nodes[0]!, key, "kafka")
    } finally {
      for (const node of nodes) await node.stop()
      await infra.close()
    }
  }
}

if (import.meta.main) await main()
