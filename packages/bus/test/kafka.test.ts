/**
 * The contract on KafkaBus: the test broker (test/setup/kafka.global.ts), a
 * private PostgreSQL shared by the nodes, and each hosting node in its own
 * process (test/support/kafka-node.ts) so it can be killed for real. The
 * client side runs here. Topic and group names carry a prefix of this run.
 */
import { DbPostgres, Migrations } from "@grove/storage"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { execFile } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as path from "node:path"
import { promisify } from "node:util"
import { inject } from "vitest"
import { startPostgres } from "../../../scripts/infra/postgres.ts"
import { spawnServer } from "../../../scripts/infra/process.ts"
import { EntityRuntime } from "../src/EntityRuntime.ts"
import * as KafkaBus from "../src/KafkaBus.ts"
import { TopicSpec } from "../src/Topics.ts"
import { Cluster, contract } from "./contract.ts"
import { createTables } from "./support/TestEntity.ts"

const bootstrap = inject("kafkaBootstrap")
const prefix = `contract-${randomUUID().slice(0, 8)}.`
/** A crashed node's partitions move after this (plus a rebalance). */
const sessionTimeoutMs = 3000
const nodeScript = path.join(import.meta.dirname, "support", "kafka-node.ts")

class Database extends Context.Service<Database, { readonly url: string }>()("grove/bus/test/Database") {}

const DatabaseLive = Layer.effect(Database, Effect.map(startPostgres(), (server) => ({ url: server.url })))

const Sql = Layer.effectDiscard(Effect.andThen(Migrations.run, createTables)).pipe(
  Layer.provideMerge(Layer.unwrap(Effect.map(Database, ({ url }) => DbPostgres.layer({ url }))))
)

const ClusterLive = Layer.effect(
  Cluster,
  Effect.gen(function*() {
    const { url } = yield* Database
    return Cluster.of({
      failover: `${sessionTimeoutMs} millis`,
      start: (nodeId) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const stop = Scope.close(scope, Exit.void)
          yield* Effect.addFinalizer(() => stop)
          const server = yield* spawnServer({
            name: nodeId,
            command: process.execPath,
            args: [nodeScript],
            env: {
              ...process.env,
              GROVE_NODE_ID: nodeId,
              GROVE_KAFKA_BOOTSTRAP: bootstrap,
              GROVE_KAFKA_PREFIX: prefix,
              GROVE_SESSION_TIMEOUT_MS: String(sessionTimeoutMs),
              GROVE_DATABASE_URL: url
            },
            stopTimeoutMs: 20_000
          }).pipe(Scope.provide(scope))
          yield* server.waitForLine((line) => line === "ready", 90_000)
          return {
            nodeId,
            stop,
            kill: Effect.sync(() => process.kill(server.pid, "SIGKILL")).pipe(
              Effect.andThen(server.awaitExit),
              Effect.andThen(stop)
            )
          }
        })
    })
  })
)

const Client = EntityRuntime.layer({ host: false }).pipe(
  Layer.provideMerge(KafkaBus.layer({ nodeId: `client-${randomUUID().slice(0, 8)}`, bootstrap, prefix, sessionTimeout: sessionTimeoutMs }))
)

contract(
  "entity runtime on KafkaBus",
  Layer.mergeAll(ClusterLive, Client).pipe(
    Layer.provideMerge(Sql),
    Layer.provideMerge(DatabaseLive)
  )
)

describe("KafkaBus.ensureTopics", () => {
  it.live("creates missing topics and refuses one whose partition count differs", () =>
    Effect.gen(function*() {
      const name = `${prefix}ensure`
      const options = { bootstrap: [bootstrap], clientId: "ensure-topics" }
      yield* KafkaBus.ensureTopics(options, [new TopicSpec({ name, partitions: 3, retentionMs: 60_000 })])
      // already there with the declared count: fine
      yield* KafkaBus.ensureTopics(options, [new TopicSpec({ name, partitions: 3, retentionMs: 60_000 })])
      const error = yield* KafkaBus.ensureTopics(options, [new TopicSpec({ name, partitions: 4, retentionMs: 60_000 })])
        .pipe(Effect.flip)
      assert.strictEqual(error._tag, "BusError")
      assert.include(error.message, "has 3 partitions, 4 are declared")
    }), 60_000)
})

describe("dead letters", () => {
  it("are JSON an operator reads with kcat: the poisoned record of the contract run, with its reason", async () => {
    const { stdout } = await promisify(execFile)(
      "kcat",
      ["-C", "-b", bootstrap, "-t", `${prefix}grove.dead-letters`, "-o", "beginning", "-e", "-q"],
      { timeout: 60_000 }
    )
    const letters = stdout.split("\n").filter((line) => line.trim() !== "").map((line) => JSON.parse(line))
    const poisoned = letters.filter((letter) => letter.type === "grove.dead-letter" && letter.record?.type === "not-a-command")
    assert.strictEqual(poisoned.length, 1)
    assert.strictEqual(poisoned[0].topic, "grove.commands")
    assert.match(poisoned[0].reason, /not a command/)
  }, 90_000)
})
