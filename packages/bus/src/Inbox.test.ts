/**
 * The reply's statement (`Inbox.complete`) returns every outbox row its command's transaction wrote, in id
 * order, for the relay to publish from memory: rows its handler reported stored are not read back.
 */
import { DbEmbedded, Migrations } from "@grove/storage"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import * as Inbox from "./Inbox.ts"
import type { OutboxRow } from "./Outbox.ts"
import type { RelayedRow } from "./OutboxRelay.ts"

const Db = Layer.effectDiscard(Migrations.run).pipe(Layer.provideMerge(DbEmbedded.layer({})))

const rowOf = (n: number): OutboxRow => {
  const eventId = randomUUID()
  return { eventId, partition: 2, topic: "grove.events", key: "k", payload: JSON.stringify({ type: "t", v: 1, n, id: eventId }) }
}

/** Inserts `row` as a handler's own statement would, and returns it as that statement's RETURNING gives it. */
const insert = (row: OutboxRow) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [stored] = yield* sql<{ id: string; payload: RelayedRow["payload"] }>`INSERT INTO event_outbox (event_id, partition, topic, key, payload)
      VALUES (${row.eventId}::uuid, ${row.partition}, ${row.topic}, ${row.key}, ${row.payload}::jsonb) RETURNING id::text AS id, payload`
    return { id: stored!.id, eventId: row.eventId, topic: row.topic, key: row.key, payload: stored!.payload } satisfies RelayedRow
  })

const begin = (commandId: string) => Inbox.register({ commandId, entityType: "T", entityId: "k", command: "C", partition: 2 })

describe("Inbox.complete", () => {
  it.effect("returns the rows reported stored, read back and appended, in id order; reads back only the unreported", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [first, second, third, appended] = [rowOf(1), rowOf(2), rowOf(3), rowOf(4)]
      const events = yield* sql.withTransaction(Effect.gen(function*() {
        yield* begin("c-1")
        const a = yield* insert(first)
        yield* insert(second)
        const c = yield* insert(third)
        // The first and third reported; the second only by its id.
        return yield* Inbox.complete("c-1", { _tag: "Success", value: null }, [second.eventId], [appended], [c, a])
      }))
      assert.deepStrictEqual(events.map((row) => (row.payload as unknown as { n: number }).n), [1, 2, 3, 4])
      const table = yield* sql<{ id: string }>`SELECT id::text AS id FROM event_outbox ORDER BY id`
      assert.deepStrictEqual(events.map((row) => row.id), table.map((row) => row.id))
    }).pipe(Effect.provide(Db)))

  it.effect("with every row reported stored, the reply is a plain UPDATE that returns them", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const row = rowOf(7)
      const events = yield* sql.withTransaction(Effect.gen(function*() {
        yield* begin("c-2")
        const stored = yield* insert(row)
        return yield* Inbox.complete("c-2", { _tag: "Success", value: 7 }, [], [], [stored])
      }))
      assert.deepStrictEqual(events.map((e) => e.eventId), [row.eventId])
      assert.deepStrictEqual(events[0]!.payload, JSON.parse(row.payload))
      const [reply] = yield* sql<{ reply: unknown }>`SELECT reply FROM command_inbox WHERE command_id = 'c-2'`
      assert.deepStrictEqual(reply!.reply, { _tag: "Success", value: 7 })
    }).pipe(Effect.provide(Db)))
})
