/**
 * The test broker (scripts/infra/kafka.ts, started once by test/setup/kafka.global.ts) is a
 * real Kafka: topics with partitions, keyed produce placed exactly where the Java producer
 * places it, consumer groups that split partitions and fail over quickly, and the stock
 * `kcat` reading what @platformatic/kafka wrote. Also the orphan guard it runs under.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Admin,
  compatibilityPartitioner,
  Consumer,
  murmur2,
  Producer,
  stringDeserializers,
  stringSerializers
} from "@platformatic/kafka"
import type { ConsumerOptions, GroupAssignment } from "@platformatic/kafka"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { inject } from "vitest"
import { kafkaClasspath } from "../../scripts/infra/kafka.ts"
import { javaCommand } from "../../scripts/infra/kafka/jvm.ts"
import { pause, runCommand, spawnServer } from "../../scripts/infra/process.ts"

const bootstrap = inject("kafkaBootstrap")
const repoRoot = path.resolve(import.meta.dirname, "../..")

/** Kafka's own murmur2 test vectors (clients/.../common/utils/UtilsTest.java, testMurmur2). */
const JAVA_MURMUR2: ReadonlyArray<readonly [string, number]> = [
  ["21", -973932308],
  ["foobar", -790332482],
  ["a-little-bit-long-string", -985981536],
  ["a-little-bit-longer-string", -1486304829],
  ["lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971],
  ["abc", 479470107]
]

/** How the Java producer picks a partition for a keyed record. */
const javaPartition = (hash: number, partitions: number) => (hash & 0x7fffffff) % partitions

let sequence = 0
/** Topic and group names no other test (or earlier run against a kept broker) uses. */
const unique = (prefix: string) => `${prefix}-${process.pid}-${Date.now()}-${sequence++}`

// ---------------------------------------------------------------------------------------------
// Clients as scoped resources.

const admin = Effect.acquireRelease(
  Effect.sync(() => new Admin({ clientId: "grove-test-admin", bootstrapBrokers: [bootstrap] })),
  (client) => Effect.promise(() => client.close())
)

const createTopic = (topic: string, partitions: number) =>
  Effect.flatMap(admin, (client) => Effect.promise(() => client.createTopics({ topics: [topic], partitions, replicas: 1 })))

/*
 * Idempotent, so the broker drops a retried batch: right after a topic is created some of its
 * partitions may not be ready, and a failed partition makes the client resend the whole batch.
 */
const producer = Effect.acquireRelease(
  Effect.sync(() =>
    new Producer({
      clientId: "grove-test-producer",
      bootstrapBrokers: [bootstrap],
      serializers: stringSerializers,
      partitioner: compatibilityPartitioner,
      idempotent: true
    })
  ),
  (client) => Effect.promise(() => client.close())
)

const produce = (topic: string, messages: ReadonlyArray<{ key: string; value: string }>) =>
  Effect.flatMap(producer, (client) =>
    Effect.promise(() => client.send({ messages: messages.map((m) => ({ topic, key: m.key, value: m.value })) })))

interface Received {
  readonly member: string
  readonly partition: number
  readonly key: string
}

/** A consumer-group member that records what it receives; it leaves the group when the scope closes. */
const member = (
  name: string,
  topic: string,
  groupId: string,
  received: Array<Received>,
  group: Partial<ConsumerOptions<string, string, string, string>>
) =>
  Effect.gen(function*() {
    const consumer = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Consumer({
          clientId: name,
          groupId,
          bootstrapBrokers: [bootstrap],
          deserializers: stringDeserializers,
          ...group
        } as ConsumerOptions<string, string, string, string>)
      ),
      (client) => Effect.promise(() => client.close(true))
    )
    const stream = yield* Effect.acquireRelease(
      Effect.promise(() => consumer.consume({ topics: [topic], mode: "earliest" })),
      (s) => Effect.promise(() => s.close())
    )
    stream.on("data", (message) => received.push({ member: name, partition: message.partition, key: message.key }))
    return consumer
  })

const partitionsOf = (assignments: ReadonlyArray<GroupAssignment> | null, topic: string) =>
  (assignments ?? []).filter((a) => a.topic === topic).flatMap((a) => a.partitions).sort((a, b) => a - b)

/** Polls `check` with real time until it holds; fails the test with `what` after `timeoutMs`. */
const eventually = (what: string, check: () => boolean, timeoutMs = 30_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`))
      yield* pause(100)
    }
  })

const range = (n: number) => Array.from({ length: n }, (_, i) => i)

/** Every record of a topic, read by the stock kcat binary (librdkafka). */
const kcatRead = (topic: string) =>
  runCommand("kcat", ["-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-J"], { timeoutMs: 30_000 }).pipe(
    Effect.orDie,
    Effect.map((out) =>
      out.split("\n").filter((line) => line.startsWith("{")).map((line) =>
        JSON.parse(line) as { partition: number; offset: number; key: string; payload: string }
      )
    )
  )

const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "grove-kafka-test-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

// ---------------------------------------------------------------------------------------------

describe("Kafka test broker", () => {
  it.live("places keyed records where the Java producer does, and kcat reads them back", () =>
    Effect.gen(function*() {
      const topic = unique("grove-test-keys")
      const partitions = 8
      yield* createTopic(topic, partitions)

      for (const [key, hash] of JAVA_MURMUR2) assert.strictEqual(murmur2(key), hash, `murmur2(${key})`)

      yield* produce(topic, JAVA_MURMUR2.map(([key]) => ({ key, value: JSON.stringify({ type: "test", v: 1, via: "platformatic" }) })))
      // The same keys through librdkafka's Java-compatible partitioner, as a third implementation.
      const dir = yield* tempDir
      const input = path.join(dir, "records.txt")
      fs.writeFileSync(input, JAVA_MURMUR2.map(([key]) => `${key}\t${JSON.stringify({ type: "test", v: 1, via: "kcat" })}\n`).join(""))
      yield* runCommand("kcat", ["-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-X", "topic.partitioner=murmur2_random", "-l", input], {
        timeoutMs: 30_000
      }).pipe(Effect.orDie)

      const records = yield* kcatRead(topic)
      assert.strictEqual(records.length, 2 * JAVA_MURMUR2.length)
      const used = new Set<number>()
      for (const [key, hash] of JAVA_MURMUR2) {
        const expected = javaPartition(hash, partitions)
        const found = records.filter((r) => r.key === key)
        assert.deepStrictEqual(found.map((r) => r.partition), [expected, expected], `partition of ${key}`)
        assert.deepStrictEqual(found.map((r) => (JSON.parse(r.payload) as { via: string }).via).sort(), ["kcat", "platformatic"])
        used.add(expected)
      }
      // The vectors spread over several partitions, so the check is not vacuous.
      assert.isAtLeast(used.size, 4)
    }))

  it.live("agrees with Java's own BuiltInPartitioner.partitionForKey", () =>
    Effect.gen(function*() {
      const classpath = yield* Effect.orDie(kafkaClasspath)
      const dir = yield* tempDir
      const source = path.join(dir, "Partition.java")
      fs.writeFileSync(
        source,
        `import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;
import java.util.HexFormat;
public class Partition {
  public static void main(String[] args) {
    int n = Integer.parseInt(args[0]);
    for (int i = 1; i < args.length; i++) {
      byte[] key = HexFormat.of().parseHex(args[i]);
      System.out.println(Utils.murmur2(key) + " " + BuiltInPartitioner.partitionForKey(key, n));
    }
  }
}
`
      )
      const keys = [...JAVA_MURMUR2.map(([key]) => key), "octo/hello", "octo/hello:feature-x", "ci-run-01J9Z", "ünïcødé/repo"]
      const partitions = 12
      // Keys go over as hex: the JVM decodes arguments by the locale, which may not be UTF-8.
      const hexKeys = keys.map((key) => Buffer.from(key, "utf8").toString("hex"))
      const out = yield* runCommand(javaCommand(), ["-cp", classpath, source, String(partitions), ...hexKeys], {
        timeoutMs: 60_000
      }).pipe(Effect.orDie)
      const lines = out.trim().split("\n")
      assert.strictEqual(lines.length, keys.length)
      keys.forEach((key, i) => {
        const [hash, partition] = (lines[i] ?? "").split(" ").map(Number)
        assert.strictEqual(murmur2(key), hash, `murmur2(${key})`)
        assert.strictEqual(compatibilityPartitioner({ topic: "t", key }, Buffer.from(key)) % partitions, partition, key)
      })
    }))

  for (const protocol of ["classic", "consumer"] as const) {
    it.live(`splits partitions between the two members of a group (${protocol} protocol)`, () =>
      Effect.gen(function*() {
        const topic = unique(`grove-test-group-${protocol}`)
        const groupId = unique("grove-test-group")
        const partitions = 4
        yield* createTopic(topic, partitions)
        // A short fetch wait: see below.
        const options = protocol === "classic"
          ? { sessionTimeout: 10_000, heartbeatInterval: 500, maxWaitTime: 500 }
          : { groupProtocol: "consumer" as const, maxWaitTime: 500 }
        const received: Array<Received> = []
        const a = yield* member("a", topic, groupId, received, options)
        const b = yield* member("b", topic, groupId, received, options)

        yield* eventually("both members to own partitions", () => {
          const pa = partitionsOf(a.assignments, topic)
          const pb = partitionsOf(b.assignments, topic)
          return pa.length > 0 && pb.length > 0 && [...pa, ...pb].sort((x, y) => x - y).join() === range(partitions).join()
        })
        const owner = new Map<number, string>()
        for (const p of partitionsOf(a.assignments, topic)) owner.set(p, "a")
        for (const p of partitionsOf(b.assignments, topic)) owner.set(p, "b")
        // @platformatic/kafka 2.12.1 delivers what a fetch sent before a rebalance returns, even
        // for partitions it has since lost; let such fetches (at most maxWaitTime) run out first.
        yield* pause(1_000)

        const keys = range(40).map((i) => `repo-${i}`)
        yield* produce(topic, keys.map((key) => ({ key, value: "{}" })))
        yield* eventually("every record to arrive", () => new Set(received.map((r) => r.key)).size === keys.length)

        for (const record of received) {
          assert.strictEqual(record.partition, javaPartition(murmur2(record.key), partitions), record.key)
          assert.strictEqual(record.member, owner.get(record.partition), `${record.key} went to the owner of partition ${record.partition}`)
        }
        assert.strictEqual(received.length, keys.length, "each record arrives once")
        assert.sameMembers([...new Set(received.map((r) => r.member))], ["a", "b"])
      }))
  }

  it.live("gives a dead member's partitions to the survivor within seconds (1.5 s session timeout)", () =>
    Effect.gen(function*() {
      const topic = unique("grove-test-failover")
      const groupId = unique("grove-test-failover")
      const partitions = 4
      yield* createTopic(topic, partitions)
      const survivor = yield* member("survivor", topic, groupId, [], { sessionTimeout: 1_500, heartbeatInterval: 300 })
      yield* eventually("the survivor to own every partition", () => partitionsOf(survivor.assignments, topic).length === partitions)

      // The other member is a separate Node process, so it can die without leaving the group.
      const script = `
        import { Consumer } from "@platformatic/kafka"
        const [bootstrap, topic, groupId] = process.argv.slice(1)
        const consumer = new Consumer({ clientId: "doomed", groupId, bootstrapBrokers: [bootstrap], sessionTimeout: 1500, heartbeatInterval: 300 })
        const stream = await consumer.consume({ topics: [topic], mode: "earliest" })
        stream.resume()
        let last = ""
        setInterval(() => {
          const now = JSON.stringify((consumer.assignments ?? []).flatMap((a) => a.partitions))
          if (now !== last) console.log("ASSIGNED " + (last = now))
        }, 100)
      `
      const doomed = yield* spawnServer({
        name: "doomed-member",
        command: process.execPath,
        args: ["--input-type=module", "-e", script, bootstrap, topic, groupId],
        cwd: repoRoot,
        stopTimeoutMs: 2_000
      }).pipe(Effect.orDie)
      yield* doomed.waitForLine((line) => /^ASSIGNED \[\d/.test(line), 30_000).pipe(Effect.orDie)
      yield* eventually("the group to settle on two members", () => {
        const owned = partitionsOf(survivor.assignments, topic).length
        return owned > 0 && owned < partitions
      })

      process.kill(doomed.pid, "SIGKILL")
      const killedAt = Date.now()
      yield* eventually("the survivor to take every partition back", () => partitionsOf(survivor.assignments, topic).length === partitions, 15_000)
      const took = Date.now() - killedAt
      assert.isBelow(took, 10_000, `failover took ${took} ms`)
    }))
})

describe("the orphan guard the broker runs under (scripts/infra/process.ts)", () => {
  it.live("escalates to SIGKILL when a server ignores SIGTERM", () =>
    Effect.gen(function*() {
      let pid = 0
      const started = Date.now()
      yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* spawnServer({
          name: "stubborn",
          command: "bash",
          args: ["-c", "trap '' TERM; echo ignoring; exec sleep 300"],
          stopTimeoutMs: 1_000
        }).pipe(Effect.orDie)
        yield* server.waitForLine((line) => line === "ignoring", 10_000).pipe(Effect.orDie)
        pid = server.pid
        assert.isTrue(isAlive(pid))
      }))
      const took = Date.now() - started
      assert.isFalse(isAlive(pid))
      assert.isAtLeast(took, 900, "SIGTERM alone did not stop it")
      assert.isBelow(took, 5_000)
    }))

  it.live("stops the server and removes its temp dir when the parent process is SIGKILLed", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const doomedDir = path.join(dir, "data")
      fs.mkdirSync(doomedDir)
      const processTs = path.join(repoRoot, "scripts/infra/process.ts")
      const script = `
        import { Effect } from "effect"
        const { spawnServer } = await import(${JSON.stringify(processTs)})
        Effect.runFork(Effect.scoped(Effect.gen(function*() {
          const server = yield* spawnServer({ name: "orphan", command: "sleep", args: ["300"], removeAfterExit: ${JSON.stringify(doomedDir)} })
          console.log("SERVER " + server.pid)
          yield* Effect.never
        })))
      `
      const parent = yield* spawnServer({
        name: "parent",
        command: process.execPath,
        args: ["--input-type=module", "-e", script],
        cwd: repoRoot
      }).pipe(Effect.orDie)
      yield* parent.waitForLine((line) => line.startsWith("SERVER "), 30_000).pipe(Effect.orDie)
      const serverPid = Number(parent.recentOutput().split("\n").find((l) => l.startsWith("SERVER "))?.slice(7))
      assert.isTrue(isAlive(serverPid))

      process.kill(parent.pid, "SIGKILL")
      yield* eventually("the orphaned server to stop", () => !isAlive(serverPid), 5_000)
      yield* eventually("its temp dir to be removed", () => !fs.existsSync(doomedDir), 5_000)
    }))
})

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
