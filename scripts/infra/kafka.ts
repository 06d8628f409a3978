/**
 * A real single-node Apache Kafka 4.x broker (KRaft: broker and controller in one JVM) from
 * Maven Central's jars, bound to 127.0.0.1 only. See scripts/infra/README.md.
 *
 * As a resource: `startKafka()` inside a Scope. It is ready when it returns, and stopped
 * (and its temp data removed) when the scope closes. As a CLI, in the foreground until
 * SIGINT/SIGTERM:
 *   npx node scripts/infra/kafka.ts [--port 9092] [--controller-port 9093] [--data-dir ./.grove-data/kafka]
 *   npm run infra:kafka -- --port 9092
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Result } from "effect"
import type { Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { kafkaClasspath } from "./kafka/classpath.ts"
import { KafkaStartError } from "./kafka/errors.ts"
import { javaCommand, planJvm } from "./kafka/jvm.ts"
import type { JvmPlan } from "./kafka/jvm.ts"
import { isKafkaReady } from "./kafka/probe.ts"
import { freePort, runCommand, spawnServer } from "./process.ts"
import type { ProcessError, ServerExit, ServerProcess } from "./process.ts"

export { KafkaStartError } from "./kafka/errors.ts"
export { kafkaClasspath } from "./kafka/classpath.ts"

export interface KafkaOptions {
  /** The client (PLAINTEXT) port on 127.0.0.1; default a free one. */
  readonly port?: number | undefined
  /** The KRaft controller port on 127.0.0.1; default a free one. */
  readonly controllerPort?: number | undefined
  /**
   * Keep the broker's data here: formatted on first use, reused afterwards, never deleted.
   * Default: a fresh temp dir, deleted when the broker stops.
   */
  readonly dataDir?: string | undefined
  /** Extra server.properties entries; they win over ./kafka/server.properties. */
  readonly properties?: Readonly<Record<string, string | number | boolean>> | undefined
  /** Extra JVM options, after the defaults (so e.g. a -Xmx here wins). */
  readonly jvmOptions?: ReadonlyArray<string> | undefined
  /** How long the broker may take to become ready; default 120 s. */
  readonly startTimeoutMs?: number | undefined
}

export interface KafkaBroker {
  /** "127.0.0.1:<port>", for `bootstrapBrokers` / `-b`. */
  readonly bootstrap: string
  readonly host: string
  readonly port: number
  readonly controllerPort: number
  readonly clusterId: string
  readonly dataDir: string
  /** Everything the broker printed in this run. */
  readonly logFile: string
  /** The JVM's pid. */
  readonly pid: number
  /** Completes when the broker ends (on its own, or by the scope's end). */
  readonly awaitExit: Effect.Effect<ServerExit>
}

const HOST = "127.0.0.1"
const RESOURCES = path.join(import.meta.dirname, "kafka")

/** A Kafka cluster id: 16 random bytes, unpadded base64url, as `kafka-storage.sh random-uuid` prints it. */
const randomClusterId = (): string => {
  for (;;) {
    const id = randomBytes(16).toString("base64url")
    // Kafka's own generator skips ids starting with "-" (they read as command-line flags).
    if (!id.startsWith("-")) return id
  }
}

const renderProperties = (values: { port: number; controllerPort: number; logDir: string }, overrides: KafkaOptions["properties"]) => {
  const template = fs.readFileSync(path.join(RESOURCES, "server.properties"), "utf8")
  const rendered = template
    .replaceAll("{{port}}", String(values.port))
    .replaceAll("{{controllerPort}}", String(values.controllerPort))
    // Properties files treat a backslash as an escape.
    .replaceAll("{{logDir}}", values.logDir.replaceAll("\\", "\\\\"))
  const extra = Object.entries(overrides ?? {}).map(([key, value]) => `${key}=${String(value)}`)
  return extra.length === 0 ? rendered : `${rendered}\n# Overrides\n${extra.join("\n")}\n`
}

const readClusterId = (logDir: string): string | undefined => {
  try {
    const meta = fs.readFileSync(path.join(logDir, "meta.properties"), "utf8")
    return /^cluster\.id=(.+)$/m.exec(meta)?.[1]?.trim()
  } catch {
    return undefined
  }
}

/** The broker's errors first (the cause is rarely in the last lines of a shutdown), then its last lines. */
const summarize = (output: string) => {
  const lines = output.split("\n")
  const errors = lines.filter((line) => / (ERROR|FATAL) |^Caused by|^[\w.$]+(Exception|Error)\b/.test(line)).slice(0, 15)
  return [...errors, ...(errors.length > 0 ? ["..."] : []), ...lines.slice(-10)].join("\n")
}

const startError = (what: string) => (error: ProcessError) =>
  new KafkaStartError({ message: `${what}: ${error.message}`, output: error.output })

/** A data dir: the caller's (kept), or a temp dir removed when the scope closes. */
const acquireDataDir = (dataDir: string | undefined) =>
  dataDir === undefined
    ? Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "grove-kafka-"))),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    )
    : Effect.sync(() => {
      const dir = path.resolve(dataDir)
      fs.mkdirSync(dir, { recursive: true })
      return dir
    })

interface Launch {
  readonly classpath: string
  readonly jvm: JvmPlan
  readonly dataDir: string
  readonly propertiesFile: string
  readonly logFile: string
  readonly port: number
  readonly keepDataDir: boolean
  readonly startTimeoutMs: number
}

/** One broker JVM, ready when this returns; stopped when the scope closes. */
const launch = (l: Launch) =>
  Effect.gen(function*() {
    const run = l.jvm.brokerRun()
    // Registered before the broker starts, so it runs after the broker has stopped.
    let server: ServerProcess | undefined
    yield* Effect.addFinalizer(() => Effect.sync(() => run.afterExit(server?.exitStatus())))
    server = yield* spawnServer({
      name: "kafka",
      command: javaCommand(),
      args: [...l.jvm.options, ...run.options, "-cp", l.classpath, "kafka.Kafka", l.propertiesFile],
      cwd: l.dataDir,
      logFile: l.logFile,
      stopTimeoutMs: 15_000,
      ...(l.keepDataDir ? {} : { removeAfterExit: l.dataDir })
    }).pipe(Effect.mapError(startError("could not start Kafka")))
    const started = server
    yield* started.waitUntil(isKafkaReady(HOST, l.port), l.startTimeoutMs, 100).pipe(
      Effect.mapError((error) =>
        new KafkaStartError({
          message: l.keepDataDir ? `${error.message} (log: ${l.logFile})` : error.message,
          output: summarize(started.recentOutput(200))
        })
      )
    )
    return started
  })

/** The port a broker could not bind because another process holds it, if that is why it failed. */
const portTaken = (error: KafkaStartError): number | undefined => {
  const port = /failed to bind to [^\s]*:(\d+): Address already in use/.exec(error.output)?.[1]
  return port === undefined ? undefined : Number(port)
}

/**
 * Starts a broker and waits until it answers a Metadata request. The scope's end stops it
 * (SIGTERM, then SIGKILL after 15 s) and deletes its temp data dir. A port picked here that
 * another process takes before the broker binds it is picked again (up to 3 tries).
 */
export const startKafka = Effect.fn("Kafka.start")(function*(
  options: KafkaOptions = {}
): Effect.fn.Return<KafkaBroker, KafkaStartError, Scope.Scope> {
  const classpath = yield* kafkaClasspath
  const dataDir = yield* acquireDataDir(options.dataDir)
  const logDir = path.join(dataDir, "kraft")
  const propertiesFile = path.join(dataDir, "server.properties")
  const jvm = planJvm(classpath, dataDir, options.jvmOptions ?? [])
  const pickPort = (given: number | undefined) =>
    given === undefined ? Effect.mapError(freePort(HOST), startError("no free port for Kafka")) : Effect.succeed(given)

  for (let attempt = 1;; attempt++) {
    // A failed launch's guard has removed a temp data dir: start it again from scratch.
    fs.mkdirSync(dataDir, { recursive: true })
    const port = yield* pickPort(options.port)
    const controllerPort = yield* pickPort(options.controllerPort)
    fs.writeFileSync(propertiesFile, renderProperties({ port, controllerPort, logDir }, options.properties))
    let clusterId = readClusterId(logDir)
    if (clusterId === undefined) {
      clusterId = randomClusterId()
      // --standalone: this node is the only voter of a dynamic (KIP-853) controller quorum.
      yield* runCommand(javaCommand(), [
        ...jvm.options,
        "-cp",
        classpath,
        "kafka.tools.StorageTool",
        "format",
        "--cluster-id",
        clusterId,
        "--config",
        propertiesFile,
        "--standalone"
      ], { timeoutMs: 120_000 }).pipe(Effect.mapError(startError("could not format the Kafka storage")))
    }
    const logFile = path.join(dataDir, "broker.log")
    const result = yield* Effect.result(launch({
      classpath,
      jvm,
      dataDir,
      propertiesFile,
      logFile,
      port,
      keepDataDir: options.dataDir !== undefined,
      startTimeoutMs: options.startTimeoutMs ?? 120_000
    }))
    if (Result.isSuccess(result)) {
      const server = result.success
      return {
        bootstrap: `${HOST}:${port}`,
        host: HOST,
        port,
        controllerPort,
        clusterId,
        dataDir,
        logFile,
        pid: server.pid,
        awaitExit: server.awaitExit
      }
    }
    const taken = portTaken(result.failure)
    const picked = (taken === port && options.port === undefined) ||
      (taken === controllerPort && options.controllerPort === undefined)
    if (!picked || attempt >= 3) return yield* result.failure
    yield* Effect.logWarning(`Kafka: port ${taken} was taken before the broker could bind it; trying other ports`)
  }
})

const cli = Effect.gen(function*() {
  const { values } = parseArgs({
    options: {
      port: { type: "string" },
      "controller-port": { type: "string" },
      "data-dir": { type: "string" }
    }
  })
  const number = Effect.fnUntraced(function*(flag: string, value: string | undefined) {
    if (value === undefined) return undefined
    const port = Number(value)
    if (Number.isInteger(port) && port > 0 && port < 65536) return port
    return yield* new KafkaStartError({ message: `--${flag} must be a port number, not "${value}"`, output: "" })
  })
  const startedAt = Date.now()
  const broker = yield* startKafka({
    port: yield* number("port", values.port),
    controllerPort: yield* number("controller-port", values["controller-port"]),
    dataDir: values["data-dir"]
  })
  console.log(`Kafka ready in ${Date.now() - startedAt} ms`)
  console.log(`  bootstrap: ${broker.bootstrap}`)
  console.log(`  data:      ${broker.dataDir}${values["data-dir"] === undefined ? " (deleted on stop)" : ""}`)
  console.log(`  log:       ${broker.logFile}`)
  console.log("Stop with Ctrl-C (SIGINT) or SIGTERM.")
  const exit = yield* broker.awaitExit
  return yield* new KafkaStartError({
    message: `Kafka stopped on its own (${exit.signal ?? `code ${exit.code}`}); see ${broker.logFile}`,
    output: ""
  })
}).pipe(Effect.scoped)

if (import.meta.main) {
  NodeRuntime.runMain(cli)
}
