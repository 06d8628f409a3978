/**
 * Cluster mode on one machine: a Kafka broker, PostgreSQL, an S3 server (MinIO)
 * and two Grove server nodes, all on 127.0.0.1, all stopped on Ctrl-C.
 *
 *   npm run cluster [-- --nodes 2 --port 8081 --data-dir ./.grove-data/cluster]
 *
 * Infrastructure data is kept under the data dir between runs.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import * as path from "node:path"
import { clusterEnv } from "./infra/clusterEnv.ts"
import { startKafka } from "./infra/kafka.ts"
import { startPostgres } from "./infra/postgres.ts"
import { freePort, spawnServer } from "./infra/process.ts"
import { startS3 } from "./infra/s3.ts"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback
}

const ROOT = path.resolve(import.meta.dirname, "..")
const nodes = Number(arg("nodes", "2"))
const firstPort = Number(arg("port", "8081"))
const dataDir = path.resolve(arg("data-dir", "./.grove-data/cluster"))

const program = Effect.gen(function*() {
  yield* Console.log(`starting Kafka, PostgreSQL and S3 (data under ${dataDir}) ...`)
  const [kafka, pg, s3] = yield* Effect.all([
    startKafka({ dataDir: path.join(dataDir, "kafka") }),
    startPostgres({ dataDir: path.join(dataDir, "pg") }),
    startS3({ dataDir: path.join(dataDir, "s3") })
  ], { concurrency: "unbounded" })
  const env = { ...process.env, ...clusterEnv(kafka, pg, s3) }
  const urls: Array<string> = []
  for (let i = 0; i < nodes; i++) {
    const port = firstPort + i === 0 ? yield* freePort() : firstPort + i
    const node = yield* spawnServer({
      name: `grove-node-${i + 1}`,
      command: process.execPath,
      args: [path.join(ROOT, "packages/server/bin/grove-server.js"), "serve", "--port", String(port), "--node-id", `node-${i + 1}`],
      env
    })
    yield* node.waitForLine((line) => line.includes("listening on"), 120_000)
    urls.push(`http://127.0.0.1:${port}`)
  }
  yield* Console.log(
    [
      "",
      `Kafka      ${kafka.bootstrap}      (kcat -C -b ${kafka.bootstrap} -t grove.events)`,
      `PostgreSQL ${pg.url}`,
      `S3         ${s3.endpoint} bucket ${s3.bucket}`,
      ...urls.map((url, i) => `node-${i + 1}     ${url}`),
      "",
      "Create a user (cluster mode talks to PostgreSQL directly):",
      `  GROVE_MODE=cluster GROVE_DATABASE_URL='${pg.url}' GROVE_KAFKA_BROKERS=${kafka.bootstrap} GROVE_S3_ENDPOINT=${s3.endpoint} npx grove-server user create alice --admin`,
      "Ctrl-C stops everything."
    ].join("\n")
  )
  return yield* Effect.never
})

NodeRuntime.runMain(Effect.scoped(program))
