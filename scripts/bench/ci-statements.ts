/**
 * What one no-op CI run costs the database and the entity runtime: SQL statements, transactions and
 * entity commands per run, counted from the server's own trace spans (an embedded server exporting to
 * a local OTLP receiver). Everything a run causes is counted (the trigger's request, the dispatcher's
 * claim, the runner's reports, the log pieces, the outbox's events); the polling GETs that wait for the
 * runs are not (their traces are left out), and what the idle server does in as long a time is
 * measured after the runs and subtracted. Prints the statements by text, most frequent first.
 *
 * With `--burst` the runs are all started first and then waited for, as `bench:ci`'s throughput measure does
 * (most then wait queued for a runner and are claimed by the dispatcher).
 *
 *   node scripts/bench/ci-statements.ts [-- --runs 20 --burst --bin other/checkout/packages/server/bin/grove-server.js]
 */
import * as os from "node:os"
import { type ReceivedSpan, startOtlpReceiver } from "../../test/support/OtlpReceiver.ts"
import { startServer } from "../../test/support/GroveServer.ts"
import { setup, start, stringArg, until } from "./ci.ts"
import { numberArg } from "./load.ts"

const sleep = (n: number) => new Promise((resolve) => setTimeout(resolve, n))
/** Effect's exporter sends every 2 s. */
const FLUSH_MS = 3_000

interface Counts {
  readonly statements: number
  readonly transactions: number
  readonly commands: number
  readonly byText: Map<string, number>
}

/** The spans of traces that are not a polling GET's. */
const count = (spans: ReadonlyArray<ReceivedSpan>): Counts => {
  const polling = new Set(spans.filter((s) => s.name === "http.server GET").map((s) => s.traceId))
  const byText = new Map<string, number>()
  let statements = 0
  let transactions = 0
  let commands = 0
  for (const span of spans) {
    if (polling.has(span.traceId)) continue
    if (span.name === "sql.transaction") transactions++
    if (span.name === "EntityRuntime.command") commands++
    const text = span.attributes["db.query.text"]
    if (typeof text !== "string") continue
    statements++
    const key = text.replace(/\s+/g, " ").trim().slice(0, 110)
    byText.set(key, (byText.get(key) ?? 0) + 1)
  }
  return { statements, transactions, commands, byText }
}

const main = async () => {
  const runs = numberArg("runs", 20)
  const bin = stringArg("bin")
  const burst = process.argv.includes("--burst")
  const receiver = await startOtlpReceiver()
  const server = await startServer({ args: ["--otlp-endpoint", receiver.url], ...(bin === undefined ? {} : { bin }) })
  try {
    const { as } = await setup(server)
    // Warm-up: the first runs prepare statements, parse the workflow and start the sandboxes.
    for (let i = 0; i < 3; i++) await until(as, await start(as, "noop"), "completed", 20)
    await sleep(FLUSH_MS)
    const before = receiver.spans().length
    const t0 = performance.now()
    if (burst) {
      const ids: Array<number> = []
      for (let i = 0; i < runs; i++) ids.push(await start(as, "noop"))
      for (const id of ids) await until(as, id, "completed", 50)
    } else {
      for (let i = 0; i < runs; i++) await until(as, await start(as, "noop"), "completed", 20)
    }
    const took = performance.now() - t0
    await sleep(FLUSH_MS)
    const mid = receiver.spans().length
    // The idle server for as long (its pollers, sweeper and outbox relay).
    await sleep(took)
    await sleep(FLUSH_MS)
    const busy = count(receiver.spans().slice(before, mid))
    const idle = count(receiver.spans().slice(mid))
    const per = (busyN: number, idleN: number) => ((busyN - idleN) / runs).toFixed(1)
    console.log(`CI no-op runs, ${burst ? "started at once" : "one after another"}: ${runs} runs in ${(took / 1000).toFixed(1)} s, load ${os.loadavg()[0]!.toFixed(1)}${bin === undefined ? "" : `, server ${bin}`}`)
    console.log(`per run (idle subtracted): ${per(busy.statements, idle.statements)} SQL statements, ${per(busy.transactions, idle.transactions)} transactions, ${per(busy.commands, idle.commands)} entity commands`)
    console.log(`idle server in as long: ${idle.statements} statements, ${idle.transactions} transactions\n`)
    console.log("statements per run, by text:")
    for (const [text, n] of [...busy.byText].sort((a, b) => b[1] - a[1])) {
      const net = (n - (idle.byText.get(text) ?? 0)) / runs
      if (net >= 0.05) console.log(`${net.toFixed(2).padStart(6)}  ${text}`)
    }
  } finally {
    await server.stop()
    await receiver.close()
  }
}

await main()
