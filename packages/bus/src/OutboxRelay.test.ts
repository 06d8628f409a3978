/**
 * The outbox relay against a real (in-memory PGlite) database and the memory bus: rows a command hands
 * over go out from memory (no read of the table, marked later in a batch), and never before older rows of
 * their partition that were not handed over (left by a crash, or by a commit whose rows did not come back).
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { assert, layer } from "@effect/vitest"
import { Deferred, Duration, Effect, Layer, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { Bus } from "./Bus.ts"
import * as MemoryBus from "./MemoryBus.ts"
import * as OutboxRelay from "./OutboxRelay.ts"
import * as Topics from "./Topics.ts"

const Services = MemoryBus.layerEmbedded({ nodeId: "relay-test" }).pipe(
  Layer.provideMerge(Layer.effectDiscard(Migrations.run)),
  Layer.provideMerge(DbEmbedded.layer({}))
)

/** Writes an unpublished row as a command's transaction does, and returns it as the relay gets it back. */
const insertRow = (partition: number, tag: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const eventId = crypto.randomUUID()
    const payload = { type: "test.relay", v: 1, id: eventId, tag }
    const [row] = yield* sql<{ readonly id: string }>`INSERT INTO event_outbox (event_id, partition, topic, key, payload)
      VALUES (${eventId}, ${partition}, ${Topics.events}, ${`relay-${partition}`}, ${JSON.stringify(payload)}::jsonb) RETURNING id::text AS id`
    return { id: row!.id, eventId, topic: Topics.events, key: `relay-${partition}`, payload } satisfies OutboxRelay.RelayedRow
  })

const publishedAt = (eventId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ readonly published: boolean }>`SELECT published_at IS NOT NULL AS published FROM event_outbox WHERE event_id = ${eventId}`
    return row?.published === true
  })

/** The tags of `test.relay` events as they reach a consumer, in order. */
const received = Effect.gen(function*() {
  const bus = yield* Bus
  const tags = yield* Queue.unbounded<string>()
  yield* bus.tail(Topics.events, (record) => {
    const value = record.value as { readonly type?: unknown; readonly tag?: unknown }
    return value.type === "test.relay" && typeof value.tag === "string" ? Queue.offer(tags, value.tag).pipe(Effect.asVoid) : Effect.void
  })
  return { next: Queue.take(tags).pipe(Effect.timeout(Duration.seconds(30))) }
})

/** Until `check` holds, within a generous bound. */
const eventually = (what: string, check: Effect.Effect<boolean, unknown, SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    for (let waited = 0; !(yield* Effect.orDie(check)); waited += 20) {
      if (waited > 30_000) return yield* Effect.die(new Error(`timed out waiting: ${what}`))
      yield* Effect.sleep(20)
    }
  })

layer(Services, { timeout: 60_000, excludeTestServices: true })("OutboxRelay", (it) => {
  it.effect("publishes handed-over rows from memory and marks them later, in one batch", () =>
    Effect.scoped(Effect.gen(function*() {
      const events = yield* received
      // No poll in the test's window, and marks held back: only the handover can publish them.
      const relay = yield* OutboxRelay.make({ pollInterval: Duration.hours(1), markDelay: Duration.seconds(5) })
      const first = yield* insertRow(1, "a1")
      const second = yield* insertRow(1, "a2")
      // The partition's first read finds these in the table.
      relay.own(1)
      assert.deepStrictEqual([yield* events.next, yield* events.next], ["a1", "a2"])
      const third = yield* insertRow(1, "a3")
      const fourth = yield* insertRow(1, "a4")
      relay.committed(1, [third, fourth])
      assert.deepStrictEqual([yield* events.next, yield* events.next], ["a3", "a4"])
      // Published from memory, not marked yet (for up to 5 s): no statement per event.
      assert.isFalse(yield* publishedAt(fourth.eventId))
      yield* eventually("the batch marked", Effect.all([publishedAt(third.eventId), publishedAt(fourth.eventId)]).pipe(Effect.map((marked) => marked.every(Boolean))))
      assert.isTrue((yield* publishedAt(first.eventId)) && (yield* publishedAt(second.eventId)))
    })))

  it.effect("rows published from memory are marked as soon as their partition is disowned, not later", () =>
    Effect.scoped(Effect.gen(function*() {
      const events = yield* received
      // Marks held back far longer than the test: only the disown can write them.
      const relay = yield* OutboxRelay.make({ pollInterval: Duration.hours(1), markDelay: Duration.hours(1) })
      // The partition's first read (of the table) is done before a row is handed over.
      const ready = yield* insertRow(4, "d0")
      relay.own(4)
      assert.strictEqual(yield* events.next, "d0")
      yield* eventually("the first read marked", publishedAt(ready.eventId))
      const row = yield* insertRow(4, "d1")
      relay.committed(4, [row])
      assert.strictEqual(yield* events.next, "d1")
      assert.isFalse(yield* publishedAt(row.eventId))
      // A rebalance takes the partition: its next owner must not find the row unpublished.
      relay.disown(4)
      yield* eventually("the row marked on disown", publishedAt(row.eventId))
    })))

  it.effect("a row not handed over goes out before newer rows of its partition that were", () =>
    Effect.scoped(Effect.gen(function*() {
      const events = yield* received
      const relay = yield* OutboxRelay.make({ pollInterval: Duration.hours(1), markDelay: Duration.hours(1) })
      const ready = yield* insertRow(2, "b0")
      relay.own(2)
      assert.strictEqual(yield* events.next, "b0")
      yield* eventually("the first read marked", publishedAt(ready.eventId))
      // A commit whose rows did not come back (the processor then wakes the relay), then one whose did.
      yield* insertRow(2, "b1")
      relay.wake()
      const newer = yield* insertRow(2, "b2")
      relay.committed(2, [newer])
      assert.deepStrictEqual([yield* events.next, yield* events.next], ["b1", "b2"])
    })))

  it.effect("a partition just owned is read from the table before its handed-over rows go", () =>
    Effect.scoped(Effect.gen(function*() {
      const events = yield* received
      const relay = yield* OutboxRelay.make({ pollInterval: Duration.hours(1), markDelay: Duration.hours(1) })
      // Left by the partition's last owner (a crash before it published them).
      yield* insertRow(3, "c1")
      yield* insertRow(3, "c2")
      relay.own(3)
      const newer = yield* insertRow(3, "c3")
      relay.committed(3, [newer])
      const seen = [yield* events.next, yield* events.next, yield* events.next]
      assert.deepStrictEqual(seen, ["c1", "c2", "c3"])
      // Each once: the handed-over row was read with the others, and dropped from memory.
      const again = yield* Deferred.make<string>()
      yield* Effect.forkScoped(Effect.flatMap(events.next, (tag) => Deferred.succeed(again, tag)))
      assert.isTrue((yield* Deferred.await(again).pipe(Effect.timeoutOption(Duration.millis(500))))._tag === "None")
    })))
})
