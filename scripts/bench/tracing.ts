/**
 * Benchmark: what tracing costs. Two embedded servers in the same run: one as shipped (tracing off, the
 * baseline) and one exporting every span to a local OTLP receiver (`--otlp-endpoint`). Alternating
 * rounds of an authenticated repository read (`GET /api/<owner>/<repo>`) and of merges (each an entity
 * command: HTTP span, send, command, transaction); prints req/s, p50, p99 and the ratio on/off, and
 * the spans received per request.
 *
 *   npm run bench:tracing [-- --duration 5 --connections 16 --rounds 3 --merges 20]
 */
import { buildCommit, pushBody } from "../../test/support/content.ts"
import { type GroveServer, startServer } from "../../test/support/GroveServer.ts"
import { api } from "../../test/support/http.ts"
import { startOtlpReceiver } from "../../test/support/OtlpReceiver.ts"
import { line, load, numberArg, type Result } from "./load.ts"

const duration = numberArg("duration", 5)
const connections = numberArg("connections", 16)
const rounds = numberArg("rounds", 3)
const merges = numberArg("merges", 20)

const receiver = await startOtlpReceiver()
const servers: Array<GroveServer> = []
try {
  const off = await startServer()
  servers.push(off)
  const on = await startServer({ args: ["--otlp-endpoint", receiver.url] })
  servers.push(on)
  const setUp = async (server: GroveServer) => {
    const key = await server.createUser("bench")
    const created = await api(server.url, key).post("/repos", { name: "read" })
    if (created.status !== 201) throw new Error(`repo: ${JSON.stringify(created.body)}`)
    return key
  }
  const keys = { off: await setUp(off), on: await setUp(on) }

  /** `merges` merges one after another (push a branch, merge it): ms per merge. */
  let mergeSeq = 0
  const mergeRun = async (server: GroveServer, key: string) => {
    const client = api(server.url, key)
    const started = performance.now()
    for (let i = 0; i < merges; i++) {
      const branch = `b${++mergeSeq}`
      const c = buildCommit({ branch, files: { [`f${mergeSeq}.txt`]: `${mergeSeq}\n` } })
      const pushed = await client.post("/bench/read/push", pushBody({ branch, commits: [c], description: branch }))
      if (pushed.body?.success !== true) throw new Error(`push: ${JSON.stringify(pushed.body)}`)
      const merged = await client.post(`/bench/read/branches/${branch}/merge`)
      if (merged.status !== 200) throw new Error(`merge: ${JSON.stringify(merged.body)}`)
    }
    return (performance.now() - started) / merges
  }

  const read = (server: GroveServer, key: string) =>
    load(`${server.url}/api/bench/read`, { authorization: `Bearer ${key}` }, { connections, duration })
  await load(`${off.url}/api/bench/read`, { authorization: `Bearer ${keys.off}` }, { connections, duration: 1 })
  await load(`${on.url}/api/bench/read`, { authorization: `Bearer ${keys.on}` }, { connections, duration: 1 })
  const measured: Array<{ off: Result; on: Result; spansPerRead: number; mergeOff: number; mergeOn: number }> = []
  for (let round = 0; round < rounds; round++) {
    const offRead = await read(off, keys.off)
    const spansBefore = receiver.spans().length
    const onRead = await read(on, keys.on)
    // The exporter sends every 2 s: wait for the round's spans before counting them.
    await new Promise((resolve) => setTimeout(resolve, 2500))
    const spansPerRead = (receiver.spans().length - spansBefore) / onRead.total
    const mergeOff = await mergeRun(off, keys.off)
    const mergeOn = await mergeRun(on, keys.on)
    measured.push({ off: offRead, on: onRead, spansPerRead, mergeOff, mergeOn })
  }
  measured.sort((x, y) => x.on.rps / x.off.rps - y.on.rps / y.off.rps)
  const median = measured[Math.floor(measured.length / 2)]!
  console.log(`tracing on (OTLP/JSON to a local receiver) vs off, ${connections} connections, ${duration} s x ${rounds} rounds (median round):`)
  console.log(line("read, tracing off (baseline)", median.off))
  console.log(line("read, tracing on", median.on))
  console.log(`ratio on/off (reads): ${(median.on.rps / median.off.rps).toFixed(2)}x (rounds: ${measured.map((m) => (m.on.rps / m.off.rps).toFixed(2)).join(", ")}); ${median.spansPerRead.toFixed(1)} spans per read`)
  const mergeRatios = measured.map((m) => m.mergeOn / m.mergeOff).sort((a, b) => a - b)
  console.log(`merges, ${merges} in a row per round: off ${measured.map((m) => m.mergeOff.toFixed(0)).join("/")} ms, on ${measured.map((m) => m.mergeOn.toFixed(0)).join("/")} ms per merge; median ratio on/off ${mergeRatios[Math.floor(mergeRatios.length / 2)]!.toFixed(2)}x`)
  console.log(`receiver: ${receiver.spans().length} spans in ${receiver.requests()} exports, ${receiver.rejected().length} rejected`)
} finally {
  for (const server of servers) await server.stop()
  await receiver.close()
}
