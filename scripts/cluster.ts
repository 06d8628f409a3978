/**
 * Cluster mode on one machine: a Kafka broker, PostgreSQL, an S3 server (MinIO)
 * and two Grove server nodes, all on 127.0.0.1, all stopped on Ctrl-C.
 *
 *   npm run cluster [-- --nodes 2 --port 8081 --data-dir ./.grove-data/cluster --logs]
 *
 * Infrastructure data is kept under the data dir between runs. PostgreSQL runs with its durable
 * defaults (fsync, synchronous_commit, full_page_writes on), unlike in the test suites.
 *
 * Logs: every node's output goes to <data-dir>/logs/node-<n>.log, PostgreSQL's and MinIO's to
 * postgres.log and minio.log there, Kafka's to <data-dir>/kafka/broker.log; the previous run's
 * files are kept as *.log.1. `--logs` also prints the nodes' logs as they grow, each line
 * prefixed with its node's name (`tail -F` style).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { clusterEnv, userCreateCommand } from "./infra/clusterEnv.ts"
import { followLogs } from "./infra/follow.ts"
import { startKafka } from "./infra/kafka.ts"
import { startPostgres } from "./infra/postgres.ts"
import { freePort, type ServerExit, spawnServer } from "./infra/process.ts"
import { startS3 } from "./infra/s3.ts"

const USAGE = "usage: npm run cluster [-- --nodes N] [--port FIRST_PORT] [--data-dir DIR] [--logs]"

const parsed = (() => {
  try {
    return parseArgs({
      options: {
        nodes: { type: "string", default: "2" },
        port: { type: "string", default: "8081" },
        "data-dir": { type: "string", default: "./.grove-data/cluster" },
        logs: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false }
      }
    }).values
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`)
    process.exit(2)
  }
})()
if (parsed.help) {
  console.log(USAGE)
  process.exit(0)
}

const ROOT = path.resolve(import.meta.dirname, "..")
const nodes = Number(parsed.nodes)
const firstPort = Number(parsed.port)
if (!Number.isInteger(nodes) || nodes < 1 || !Number.isInteger(firstPort) || firstPort < 0 || firstPort + nodes > 65536) {
  console.error(`--nodes must be a positive whole number and --port a port number\n${USAGE}`)
  process.exit(2)
}
const dataDir = path.resolve(parsed["data-dir"])
const logDir = path.join(dataDir, "logs")
const nodeName = (i: number) => `node-${i + 1}`
const logFile = (name: string) => path.join(logDir, `${name}.log`)

/** A fresh log dir for this run; the previous run's logs are kept as `<name>.log.1`. */
const prepareLogDir = Effect.sync(() => {
  fs.mkdirSync(logDir, { recursive: true })
  for (const name of fs.readdirSync(logDir)) {
    if (name.endsWith(".log")) fs.renameSync(path.join(logDir, name), path.join(logDir, `${name}.1`))
  }
})

const describeExit = (exit: ServerExit) => exit.signal !== null
  ? `killed by ${exit.signal}`
  : exit.code !== null && exit.code > 128
  ? `killed by signal ${exit.code - 128}`
  : `exited with code ${exit.code}`

const program = Effect.gen(function*() {
  yield* prepareLogDir
  const kafkaLog = path.join(dataDir, "kafka", "broker.log")
  yield* Console.log(`starting Kafka, PostgreSQL and S3 (data under ${dataDir}) ...`)
  yield* Console.log(
    `logs in ${logDir} (node-<n>.log, postgres.log, minio.log; Kafka's: ${kafkaLog})` +
      (parsed.logs ? "" : "; --logs prints the nodes' logs here as they grow")
  )
  const [kafka, pg, s3] = yield* Effect.all([
    startKafka({ dataDir: path.join(dataDir, "kafka") }),
    // PostgreSQL's durable defaults: an acknowledged write survives a crash (the tests trade that for speed).
    startPostgres({ dataDir: path.join(dataDir, "pg"), durable: true, logFile: logFile("postgres") }),
    startS3({ dataDir: path.join(dataDir, "s3"), logFile: logFile("minio") })
  ], { concurrency: "unbounded" })
  const nodeEnv = clusterEnv(kafka, pg, s3)
  const env = { ...process.env, ...nodeEnv }
  // Followed from before the nodes start, so their startup lines show too, and its last
  // look at the files comes after they have stopped.
  const follower = parsed.logs
    ? yield* followLogs(Array.from({ length: nodes }, (_, i) => ({ label: nodeName(i), file: logFile(nodeName(i)) })))
    : undefined
  const started: Array<{ readonly url: string; readonly pid: number }> = []
  for (let i = 0; i < nodes; i++) {
    const name = nodeName(i)
    const port = firstPort + i === 0 ? yield* freePort() : firstPort + i
    const node = yield* spawnServer({
      name: `grove-${name}`,
      command: process.execPath,
      args: [path.join(ROOT, "packages/server/bin/grove-server.js"), "serve", "--port", String(port), "--node-id", name],
      env,
      logFile: logFile(name)
    })
    yield* node.waitForLine((line) => line.includes("listening on"), 120_000)
    // Interrupted when the cluster stops, before the node is: this reports only a node that ended on its own.
    yield* Effect.forkScoped(node.awaitExit.pipe(
      Effect.flatMap((exit) => Console.error(`${name} (pid ${node.pid}) ${describeExit(exit)}; its log: ${logFile(name)}`))
    ))
    started.push({ url: `http://127.0.0.1:${port}`, pid: node.pid })
  }
  // The nodes' startup lines first, so the addresses below stay in view.
  if (follower !== undefined) yield* follower.flush
  yield* Console.log(
    [
      "",
      `Kafka      ${kafka.bootstrap}      (kcat -C -b ${kafka.bootstrap} -t grove.events)`,
      `PostgreSQL ${pg.url}`,
      `S3         ${s3.endpoint} bucket ${s3.bucket}`,
      ...started.map(({ pid, url }, i) => `${nodeName(i).padEnd(10)} ${url}   (pid ${pid}, log ${logFile(nodeName(i))})`),
      "",
      `Logs       ${logDir}  (Kafka: ${kafka.logFile})`,
      "",
      "Create a user (cluster mode talks to PostgreSQL directly; run it in the checkout):",
      `  ${userCreateCommand(nodeEnv, "alice")}`,
      "Ctrl-C stops everything."
    ].join("\n")
  )
  return yield* Effect.never
})

NodeRuntime.runMain(Effect.scoped(program))
