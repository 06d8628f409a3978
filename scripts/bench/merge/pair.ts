/**
 * Two servers' serialized merges in turns, for A/B on a loaded machine: one merge on each, alternately (which
 * goes first alternates too), so both see the same load as it moves; each server's CPU per merge from /proc.
 *
 *   node scripts/bench/merge/pair.ts --old <checkout>/packages/server/bin/grove-server.js --new <...> [--merges 150] [--tree-files 1000]
 *
 * Run with GROVE_BUNDLE=1 to run each checkout's bundle even if its sources are newer.
 */
import * as os from "node:os"
import { type GroveServer, startServer } from "../../../test/support/GroveServer.ts"
import { api } from "../../../test/support/http.ts"
import { numberArg } from "../load.ts"
import { cpuDuring } from "../table/cpu.ts"
import { percentile } from "../table/measure.ts"
import { prepare, WARM_UP } from "./main.ts"

const arg = (name: string) => {
  const at = process.argv.indexOf(`--${name}`)
  const value = at < 0 ? undefined : process.argv[at + 1]
  if (value === undefined) throw new Error(`--${name} <grove-server.js> is required`)
  return value
}
const MERGES = numberArg("merges", 150)
const TREE_FILES = numberArg("tree-files", 1000)

const sides = [{ name: "old", bin: arg("old") }, { name: "new", bin: arg("new") }] as const
const servers: Array<GroveServer> = []
try {
  for (const side of sides) servers.push(await startServer({ bin: side.bin }))
  const prepared = await Promise.all(servers.map(async (server) => {
    const token = await server.createUser("bench")
    return { a: api(server.url, token), branches: await prepare(server.url, token, "bench", "solo", MERGES + WARM_UP, TREE_FILES) }
  }))
  const latencies: Array<Array<number>> = [[], []]
  const mergeOne = async (i: number, s: number) => {
    const { a, branches } = prepared[s]!
    const t0 = performance.now()
    const reply = await a.post(`/bench/solo/branches/${branches[i]}/merge`)
    if (reply.status !== 200) throw new Error(`${sides[s]!.name}: merge ${i}: ${reply.status} ${JSON.stringify(reply.body)}`)
    return performance.now() - t0
  }
  for (let i = 0; i < WARM_UP; i++) for (let s = 0; s < 2; s++) await mergeOne(i, s)
  const { cpu } = await cpuDuring(servers.map((server) => server.process.pid!), async () => {
    for (let i = WARM_UP; i < WARM_UP + MERGES; i++) {
      for (const s of i % 2 === 0 ? [0, 1] : [1, 0]) latencies[s]!.push(await mergeOne(i, s))
    }
  })
  console.log(`${MERGES} merges each, ${TREE_FILES}-file tree, in turns; load ${os.loadavg()[0]!.toFixed(1)} at the end`)
  for (const [s, side] of sides.entries()) {
    const cpuUs = (cpu.nodes[s]!.cpuMs * 1000) / MERGES
    console.log(`${side.name}: server CPU ${cpuUs.toFixed(0)} µs/merge, p50 ${percentile(latencies[s]!, 0.5).toFixed(1)} ms, p99 ${percentile(latencies[s]!, 0.99).toFixed(1)} ms  (${side.bin})`)
  }
} finally {
  for (const server of servers) await server.stop()
}
