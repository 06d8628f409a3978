/**
 * The contract every Bus must pass with the entity runtime on top: per-key
 * order, one writer per partition, takeover by a joining node, handover from
 * a leaving one, failover from a killed node with nothing acknowledged lost
 * and nothing applied twice,
 * fencing of a stale owner, replay of stored replies, operations readable
 * after a timeout, and the outbox relay. `memory.test.ts` runs it on
 * MemoryBus + PGlite, `kafka.test.ts` on Kafka + PostgreSQL.
 */
import { assert, layer } from "@effect/vitest"
import { Clock, Context, Duration, Effect, Exit, Fiber, Option, Queue, Stream } from "effect"
import type { Layer, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { Bus } from "../src/Bus.ts"
import { EntityRuntime } from "../src/EntityRuntime.ts"
import type { CommandFailed, CommandIdReused, CommandTimeout, DeadLetter } from "../src/Messages.ts"
import { partitionFor } from "../src/murmur2.ts"
import * as PartitionFence from "../src/PartitionFence.ts"
import * as Topics from "../src/Topics.ts"
import { TestEntity, type TestRejected } from "./support/TestEntity.ts"

export interface ClusterNode {
  readonly nodeId: string
  /** Abrupt death: no graceful leave, no further offset commits. */
  readonly kill: Effect.Effect<void>
  /** Graceful stop. */
  readonly stop: Effect.Effect<void>
}

export interface ClusterShape {
  /** Starts a node hosting `TestEntity`; it stops with the enclosing scope at the latest. */
  readonly start: (nodeId: string) => Effect.Effect<ClusterNode, unknown, Scope.Scope>
  /** How long the bus may take to hand a dead node's partitions to the survivors. */
  readonly failover: Duration.Input
}

export class Cluster extends Context.Service<Cluster, ClusterShape>()("grove/bus/test/Cluster") {}

/** The client side (a node that only sends) plus the shared database and the cluster of hosting nodes. */
export type ContractServices = Cluster | EntityRuntime | Bus | SqlClient.SqlClient

const commandPartitions = Topics.find(Topics.all, Topics.commands)!.partitions

/** An entity id of this run whose key lands on `partition`. */
const idOn = (prefix: string, partition: number) => {
  for (let i = 0;; i++) {
    const id = `${prefix}-${i}`
    if (partitionFor(id, commandPartitions) === partition) return id
  }
}

const waitUntil = <E, R>(what: string, check: Effect.Effect<boolean, E, R>, within: Duration.Input) =>
  Effect.gen(function*() {
    const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(within)
    while (!(yield* check)) {
      if ((yield* Clock.currentTimeMillis) > deadline) return yield* Effect.die(new Error(`timed out waiting: ${what}`))
      yield* Effect.sleep(50)
    }
  })

const owners = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly partition: number; readonly owner: string; readonly epoch: number }>`
    SELECT partition, owner, epoch FROM partition_epochs WHERE topic = ${Topics.commands}`
  return new Map(rows.map((row) => [row.partition, row]))
})

/**
 * Waits until every command partition was last claimed by one of `nodes`
 * and the partitions are spread evenly among them (the rebalance is over).
 */
const ownedBy = (nodes: ReadonlyArray<string>, within: Duration.Input) =>
  waitUntil(
    `partitions owned evenly by ${nodes.join(", ")}`,
    Effect.map(owners, (current) => {
      const held = new Map(nodes.map((node) => [node, 0]))
      for (let partition = 0; partition < commandPartitions; partition++) {
        const owner = current.get(partition)?.owner
        const count = owner === undefined ? undefined : held.get(owner)
        if (owner === undefined || count === undefined) return false
        held.set(owner, count + 1)
      }
      const counts = [...held.values()]
      return Math.max(...counts) - Math.min(...counts) <= 1
    }),
    within
  )

const applications = (commandIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (commandIds.length === 0) return new Map<string, number>()
    const rows = yield* sql<{ readonly commandId: string; readonly count: number }>`
      SELECT command_id AS "commandId", count(*)::int AS count FROM bus_test_applied
      WHERE command_id IN ${sql.in(commandIds)} GROUP BY command_id`
    return new Map(rows.map((row) => [row.commandId, row.count]))
  })

/**
 * Per partition, in commit order: epochs never go back and each epoch has a
 * single writer.
 */
const assertSingleWriter = (entityPrefix: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly partition: number; readonly epoch: number; readonly nodeId: string }>`
      SELECT partition, epoch, node_id AS "nodeId" FROM bus_test_applied
      WHERE entity_id LIKE ${entityPrefix + "%"} ORDER BY id`
    const last = new Map<number, number>()
    const writer = new Map<string, string>()
    for (const row of rows) {
      const previous = last.get(row.partition) ?? 0
      assert.isTrue(row.epoch >= previous, `partition ${row.partition}: epoch ${row.epoch} after ${previous}`)
      last.set(row.partition, row.epoch)
      const key = `${row.partition}/${row.epoch}`
      const seen = writer.get(key)
      if (seen !== undefined) assert.strictEqual(row.nodeId, seen, `two writers in ${key}`)
      writer.set(key, row.nodeId)
    }
    return rows.length
  })

/** Polls the inbox until the operation has an outcome. */
const outcomeOf = (operationId: string, within: Duration.Input) =>
  Effect.gen(function*() {
    const runtime = yield* EntityRuntime
    let found = Option.none<unknown>()
    yield* waitUntil(
      `operation ${operationId}`,
      Effect.map(runtime.operation(operationId), (operation) => {
        found = Option.flatMap(operation, (known) => Option.map(Option.fromNullishOr(known.reply), (reply) => ({ reply })))
        return Option.isSome(found)
      }),
      within
    )
    return Option.getOrThrow(found) as { readonly reply: { readonly _tag: string } }
  })

type ApplyError = CommandTimeout | CommandFailed | CommandIdReused

export const contract = (name: string, services: Layer.Layer<ContractServices, unknown>) =>
  layer(services, { excludeTestServices: true, timeout: "60 seconds" })(name, (it) => {
    const run = randomUUID().slice(0, 8)

    it.effect("keeps the order of commands per key", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        const sql = yield* SqlClient.SqlClient
        yield* cluster.start(`order-a-${run}`)
        const keys = Array.from({ length: 5 }, (_, i) => `order-${run}-${i}`)
        const waits: Array<Effect.Effect<unknown, ApplyError>> = []
        for (let seq = 0; seq < 100; seq++) {
          waits.push(yield* runtime.submit(TestEntity, keys[seq % keys.length]!, "Apply", { seq }))
        }
        const replies = yield* Effect.all(waits, { concurrency: "unbounded" })
        assert.strictEqual(replies.length, 100)
        for (const key of keys) {
          const rows = yield* sql<{ readonly seq: number }>`SELECT seq FROM bus_test_applied WHERE entity_id = ${key} ORDER BY id`
          const seqs = rows.map((row) => row.seq)
          assert.strictEqual(seqs.length, 20)
          assert.deepStrictEqual(seqs, [...seqs].sort((a, b) => a - b))
        }
      }), { timeout: 120_000 })

    it.effect("hands partitions to a joining node, one writer per partition throughout", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        const prefix = `join-${run}`
        const a = `join-a-${run}`
        const b = `join-b-${run}`
        yield* cluster.start(a)
        // keep commands flowing on every partition while b joins
        const load = yield* Effect.forEach(Array.from({ length: 3 * commandPartitions }, (_, i) => i), (i) =>
          runtime.send(TestEntity, idOn(prefix, i % commandPartitions), "Apply", { seq: i }, { timeout: "60 seconds" }), {
          concurrency: 8
        }).pipe(Effect.forkChild)
        yield* Effect.sleep(200)
        yield* cluster.start(b)
        yield* ownedBy([a, b], "60 seconds")
        yield* Fiber.join(load)
        // After the rebalance each partition is written by its owner's claim. The group may settle with one more
        // rebalance after the spread is even (a node claiming a partition again under a new epoch: seen in CI, epoch
        // 3 where the look before the write read 2), so the write is held to the claims read before and after it.
        for (let partition = 0; partition < commandPartitions; partition++) {
          const before = (yield* owners).get(partition)!
          const applied = yield* runtime.send(TestEntity, idOn(prefix, partition), "Apply", { seq: 1000 + partition })
          const after = (yield* owners).get(partition)!
          if (before.epoch === after.epoch) {
            assert.strictEqual(applied.node, before.owner)
            assert.strictEqual(applied.epoch, before.epoch)
          } else {
            assert.isTrue(applied.epoch >= before.epoch && applied.epoch <= after.epoch, `partition ${partition}: epoch ${applied.epoch} outside ${before.epoch}..${after.epoch}`)
            if (applied.epoch === after.epoch) assert.strictEqual(applied.node, after.owner)
            if (applied.epoch === before.epoch) assert.strictEqual(applied.node, before.owner)
          }
        }
        assert.isTrue((yield* assertSingleWriter(prefix)) >= 4 * commandPartitions)
      }), { timeout: 180_000 })

    it.effect("takes a leaving node's partitions back without losing or repeating a command", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        const prefix = `leave-${run}`
        const a = `leave-a-${run}`
        yield* cluster.start(a)
        const leaving = yield* cluster.start(`leave-b-${run}`)
        yield* ownedBy([a, leaving.nodeId], "60 seconds")
        const ids = Array.from({ length: 4 * commandPartitions }, (_, i) => `${prefix}-cmd-${i}`)
        const load = yield* Effect.forEach(ids, (commandId, i) =>
          runtime.send(TestEntity, idOn(prefix, i % commandPartitions), "Apply", { seq: i }, {
            commandId,
            timeout: "60 seconds"
          }), { concurrency: 8 }).pipe(Effect.forkChild)
        yield* Effect.sleep(100)
        yield* leaving.stop
        yield* Fiber.join(load)
        yield* ownedBy([a], "60 seconds")
        const counts = yield* applications(ids)
        for (const id of ids) assert.strictEqual(counts.get(id), 1, `${id} applied ${counts.get(id) ?? 0} times`)
        yield* assertSingleWriter(prefix)
      }), { timeout: 180_000 })

    it.effect("resumes a killed node's partitions: nothing acknowledged is lost, nothing is applied twice", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        const prefix = `kill-${run}`
        const a = `kill-a-${run}`
        const b = `kill-b-${run}`
        yield* cluster.start(a)
        const victim = yield* cluster.start(b)
        yield* ownedBy([a, b], "60 seconds")
        const timeout = Duration.sum(Duration.fromInputUnsafe(cluster.failover), Duration.seconds(20))
        const ids: Array<string> = []
        const waits: Array<Fiber.Fiber<unknown, ApplyError>> = []
        let killedAt = 0
        for (let i = 0; i < 200; i++) {
          if (i === 80) {
            yield* victim.kill
            killedAt = yield* Clock.currentTimeMillis
          }
          const commandId = `${prefix}-cmd-${i}`
          ids.push(commandId)
          const wait = yield* runtime.submit(TestEntity, idOn(prefix, i % commandPartitions), "Apply", { seq: i }, {
            commandId,
            timeout
          })
          waits.push(yield* Effect.forkChild(wait))
          if (i % 20 === 0) yield* Effect.sleep(10)
        }
        const exits = yield* Effect.forEach(waits, Fiber.await)
        const answeredAt = yield* Clock.currentTimeMillis
        // every command that was not acknowledged has an outcome in the inbox after failover
        for (let i = 0; i < exits.length; i++) {
          const exit = exits[i]!
          if (Exit.isSuccess(exit)) continue
          const outcome = yield* outcomeOf(ids[i]!, timeout)
          assert.strictEqual(outcome.reply._tag, "Success")
        }
        const counts = yield* applications(ids)
        for (const id of ids) assert.strictEqual(counts.get(id), 1, `${id} applied ${counts.get(id) ?? 0} times`)
        yield* assertSingleWriter(prefix)
        yield* Effect.log(`failover: all 200 commands answered ${answeredAt - killedAt} ms after the kill`)
      }), { timeout: 180_000 })

    it.effect("fences a stale claim, and the node the partition is assigned to claims it again and serves it", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        const prefix = `fence-${run}`
        const a = `fence-a-${run}`
        const b = `fence-b-${run}`
        yield* cluster.start(a)
        yield* cluster.start(b)
        yield* ownedBy([a, b], "60 seconds")
        // A partition the latest generation gave to b; a's worker of an earlier generation claims it late (issue 21, run 3).
        const current = yield* owners
        const partition = [...current.values()].find((row) => row.owner === b)!.partition
        const id = idOn(prefix, partition)
        const stale = yield* PartitionFence.claim(Topics.commands, partition, a)
        assert.isTrue(stale > current.get(partition)!.epoch)
        // b is fenced, finds the partition still assigned to it, claims a newer epoch and applies the command once.
        const commandId = `${prefix}-after-stale`
        const applied = yield* runtime.send(TestEntity, id, "Apply", { seq: 2 }, { commandId, timeout: "10 seconds" })
        assert.strictEqual(applied.node, b)
        assert.isTrue(applied.epoch > stale)
        assert.strictEqual((yield* applications([commandId])).get(commandId), 1)
        const owner = (yield* owners).get(partition)!
        assert.strictEqual(owner.owner, b)
        assert.strictEqual(owner.epoch, applied.epoch)
      }), { timeout: 120_000 })

    it.effect("settles poisoned commands as failed and goes on: the good ones around them apply in order", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        const bus = yield* Bus
        const sql = yield* SqlClient.SqlClient
        yield* cluster.start(`poison-a-${run}`)
        const prefix = `poison-${run}`
        const partition = 11
        const good = idOn(prefix, partition)
        const options = (name: string) => ({ commandId: `${prefix}-${name}`, timeout: "30 seconds" }) as const
        yield* runtime.send(TestEntity, good, "Apply", { seq: 0 }, options("warm"))
        const startedAt = yield* Clock.currentTimeMillis
        const first = yield* runtime.submit(TestEntity, good, "Apply", { seq: 1 }, options("first"))
        // A command whose entity id PostgreSQL cannot store (a NUL), as a faulty sender would put it on the bus.
        const nulId = idOn(`${prefix}\u0000`, partition)
        yield* bus.publish([{
          topic: Topics.commands,
          key: nulId,
          value: {
            type: "grove.command",
            v: 1,
            commandId: `${prefix}-nul`,
            entityType: TestEntity.name,
            entityId: nulId,
            command: "Apply",
            payload: { seq: 2 }
          }
        }])
        // A command whose reply cannot be stored.
        const unstorable = yield* runtime.submit(TestEntity, good, "Unstorable", { seq: 3 }, options("unstorable"))
        // A record that is no command at all.
        yield* bus.publish([{ topic: Topics.commands, key: good, value: { type: "not-a-command", v: 1, run } }])
        const last = yield* runtime.submit(TestEntity, good, "Apply", { seq: 4 }, options("last"))
        const [one, three, four] = yield* Effect.all([first, Effect.flip(unstorable), last])
        const answeredAt = yield* Clock.currentTimeMillis
        assert.strictEqual(one.seq, 1)
        assert.strictEqual(four.seq, 4)
        assert.strictEqual(three._tag, "CommandFailed")
        assert.isTrue((three as CommandFailed).settled)
        // Settled outcomes: read back as failed, so nobody polls forever.
        const nul = yield* outcomeOf(`${prefix}-nul`, "30 seconds")
        assert.strictEqual(nul.reply._tag, "Defect")
        assert.strictEqual((yield* outcomeOf(`${prefix}-unstorable`, "5 seconds")).reply._tag, "Defect")
        // The good ones applied once each, in order; the unstorable one's write was rolled back.
        const rows = yield* sql<{ readonly seq: number }>`SELECT seq FROM bus_test_applied WHERE entity_id = ${good} ORDER BY id`
        assert.deepStrictEqual(rows.map((row) => row.seq), [0, 1, 4])
        // The record that is no command went to the dead-letter topic, with the reason.
        const letters = yield* Queue.unbounded<DeadLetter>()
        yield* bus.consume(`contract-dead-letters-${run}`, Topics.deadLetters, (claim) =>
          claim.records.pipe(Stream.runForEach((record) => {
            const letter = record.value as DeadLetter
            return (letter.record as { readonly run?: unknown } | undefined)?.run === run
              ? Queue.offer(letters, letter)
              : Effect.void
          })))
        const letter = yield* Queue.take(letters).pipe(Effect.timeout("30 seconds"), Effect.orDie)
        assert.strictEqual(letter.topic, Topics.commands)
        assert.strictEqual(letter.partition, partition)
        assert.strictEqual(letter.key, good)
        assert.match(letter.reason, /not a command/)
        yield* Effect.sleep(500)
        assert.strictEqual(yield* Queue.size(letters), 0, "one dead letter, not more")
        yield* Effect.log(`poison: 3 poisoned records between good ones answered in ${answeredAt - startedAt} ms; 1 dead letter`)
      }), { timeout: 120_000 })

    it.effect("refuses a command id already used for another request, and tells unknown ids from pending ones", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        yield* cluster.start(`reuse-a-${run}`)
        const id = `reuse-${run}`
        const options = { commandId: `${id}-key`, owner: "alice", fingerprint: "POST /a", timeout: "30 seconds" } as const
        const first = yield* runtime.send(TestEntity, id, "Apply", { seq: 1 }, options)
        // The same request again replays; another fingerprint or another owner is refused.
        assert.deepStrictEqual(yield* runtime.send(TestEntity, id, "Apply", { seq: 1 }, options), first)
        const other = yield* runtime.send(TestEntity, id, "Apply", { seq: 2 }, { ...options, fingerprint: "POST /b" }).pipe(Effect.flip)
        assert.strictEqual(other._tag, "CommandIdReused")
        const stranger = yield* runtime.send(TestEntity, id, "Apply", { seq: 1 }, { ...options, owner: "mallory" }).pipe(Effect.flip)
        assert.strictEqual(stranger._tag, "CommandIdReused")
        assert.strictEqual((yield* applications([options.commandId])).get(options.commandId), 1)
        const known = yield* runtime.operation(options.commandId)
        assert.isTrue(Option.isSome(known))
        assert.strictEqual(Option.getOrThrow(known).owner, "alice")
        assert.isTrue(Option.isNone(yield* runtime.operation(`${id}-never-sent`)))
      }), { timeout: 120_000 })

    it.effect("replays the stored reply of a command id seen before", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        const sql = yield* SqlClient.SqlClient
        yield* cluster.start(`dup-a-${run}`)
        const id = `dup-${run}`
        const once = { commandId: `dup-${run}-apply`, timeout: "60 seconds" } as const
        const first = yield* runtime.send(TestEntity, id, "Apply", { seq: 1 }, once)
        const again = yield* runtime.send(TestEntity, id, "Apply", { seq: 2 }, once)
        assert.deepStrictEqual(again, first)
        assert.strictEqual((yield* applications([once.commandId])).get(once.commandId), 1)

        const rejectId = `dup-${run}-reject`
        const rejected = yield* runtime.send(TestEntity, id, "Reject", { reason: "no" }, { commandId: rejectId }).pipe(
          Effect.flip
        )
        assert.strictEqual(rejected._tag, "TestRejected")
        assert.strictEqual((rejected as TestRejected).reason, "no")
        const rejectedAgain = yield* runtime.send(TestEntity, id, "Reject", { reason: "other" }, { commandId: rejectId })
          .pipe(Effect.flip)
        assert.strictEqual((rejectedAgain as TestRejected).reason, "no")
        // the handler's write before failing was rolled back
        assert.isFalse((yield* applications([rejectId])).has(rejectId))

        const crashId = `dup-${run}-crash`
        const crashed = yield* runtime.send(TestEntity, id, "Crash", {}, { commandId: crashId }).pipe(Effect.flip)
        assert.strictEqual(crashed._tag, "CommandFailed")
        const crashedAgain = yield* runtime.send(TestEntity, id, "Crash", {}, { commandId: crashId }).pipe(Effect.flip)
        assert.strictEqual(crashedAgain._tag, "CommandFailed")
        assert.strictEqual((crashedAgain as CommandFailed).message, (crashed as CommandFailed).message)
        const stored = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM command_inbox
          WHERE command_id IN ${sql.in([once.commandId, rejectId, crashId])}`
        assert.strictEqual(stored[0]!.n, 3)
      }), { timeout: 120_000 })

    it.effect("answers a timed-out request with an operation id whose outcome can be read later", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        yield* cluster.start(`slow-a-${run}`)
        const id = `slow-${run}`
        // warm up: the partition is claimed and the handler registered
        yield* runtime.send(TestEntity, id, "Apply", { seq: 0 }, { timeout: "60 seconds" })
        const error = yield* runtime.send(TestEntity, id, "Apply", { seq: 1, sleepMs: 1500 }, { timeout: "300 millis" })
          .pipe(Effect.flip)
        assert.strictEqual(error._tag, "CommandTimeout")
        const operationId = (error as CommandTimeout).operationId
        const outcome = yield* outcomeOf(operationId, "30 seconds")
        assert.deepStrictEqual(outcome.reply._tag, "Success")
        assert.isTrue(Option.isNone(yield* runtime.operation(`never-sent-${run}`)))
      }), { timeout: 120_000 })

    it.effect("relays outbox events in order, each with a unique id", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster
        const runtime = yield* EntityRuntime
        const bus = yield* Bus
        yield* cluster.start(`events-a-${run}`)
        const id = `events-${run}`
        const received = yield* Queue.unbounded<{ readonly id: string; readonly n: number }>()
        yield* bus.consume(`contract-events-${run}`, Topics.events, (claim) =>
          claim.records.pipe(Stream.runForEach((record) => {
            const event = record.value as { readonly id: string; readonly entityId: string; readonly n: number }
            return record.key === id && event.entityId === id
              ? Queue.offer(received, { id: event.id, n: event.n })
              : Effect.void
          })))
        const first = yield* runtime.send(TestEntity, id, "Emit", { count: 3 }, { timeout: "60 seconds" })
        const second = yield* runtime.send(TestEntity, id, "Emit", { count: 2 })
        const expected = [...first, ...second]
        assert.strictEqual(new Set(expected).size, 5)
        const seen: Array<{ readonly id: string; readonly n: number }> = []
        while (new Set(seen.map((event) => event.id)).size < 5) {
          seen.push(yield* Queue.take(received).pipe(Effect.timeout("30 seconds"), Effect.orDie))
        }
        // first occurrences in order (delivery is at least once)
        const firsts = seen.filter((event, i) => seen.findIndex((other) => other.id === event.id) === i)
        assert.deepStrictEqual(firsts.map((event) => event.id), expected)
        const sql = yield* SqlClient.SqlClient
        yield* waitUntil(
          "outbox rows marked published",
          Effect.map(
            sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM event_outbox
              WHERE event_id::text IN ${sql.in(expected)} AND published_at IS NOT NULL`,
            (rows) => rows[0]!.n === 5
          ),
          "30 seconds"
        )
      }), { timeout: 120_000 })

    it.effect("tails a topic from its end: every record published afterwards, none from before", () =>
      Effect.gen(function*() {
        const bus = yield* Bus
        const before = `tail-before-${run}`
        yield* bus.publish([{ topic: Topics.events, key: before, value: { type: "test.tail", v: 1, tag: before } }])
        const seen = yield* Queue.unbounded<string>()
        const tags = Array.from({ length: 8 }, (_, i) => `tail-${run}-${i}`)
        yield* bus.tail(Topics.events, (record) => {
          const tag = (record.value as { readonly tag?: unknown }).tag
          return typeof tag === "string" && tag.startsWith("tail-") ? Queue.offer(seen, tag).pipe(Effect.asVoid) : Effect.void
        })
        // Keys spread over partitions, so every partition is read.
        yield* bus.publish(tags.map((tag) => ({ topic: Topics.events, key: tag, value: { type: "test.tail", v: 1, tag } })))
        const got = new Set<string>()
        while (got.size < tags.length) got.add(yield* Queue.take(seen).pipe(Effect.timeout("30 seconds"), Effect.orDie))
        assert.deepStrictEqual([...got].sort(), [...tags].sort())
        assert.isFalse(got.has(before))
        const undeclared = yield* bus.tail("no.such.topic", () => Effect.void).pipe(Effect.exit)
        assert.isTrue(Exit.isFailure(undeclared))
      }), { timeout: 120_000 })
  })
